"""Why the model chose a word: logit lens and head ablation (explain), attribution, activation patching and the
contrastive "why X rather than Y". Every result is a returned value; imports model.core, model.io, model.decode."""
