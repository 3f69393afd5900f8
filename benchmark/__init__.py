"""CultureLens: a benchmark for the cultural competence of text-to-image models."""

__version__ = "0.1.0"
