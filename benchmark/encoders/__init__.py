"""Image and text backbones. Production loads real checkpoints; tests build tiny ones of the same classes.

``spec`` describes what to load (light, no torch); ``open_clip`` loads it.
"""
