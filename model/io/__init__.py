"""Model directories on disk: safetensors + JSON checkpoints, Marian import and export. Imports only model.core."""
