"""The model's maths: one frozen ``ModelConfig``, the tokenizer, the Transformer (one class per box of the paper's
figure), which heads an ablation switches off, the shared constants and strict JSON. Imports nothing else of model."""
