"""Training: the corpora, the tokenizer's training, the copy-teaching substitutions and the training loop
(``python -m model.train``). Imports the packages below it."""
