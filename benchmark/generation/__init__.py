"""Generate a submission with any ``diffusers`` text-to-image pipeline: presets, deterministic seeds, resume."""
