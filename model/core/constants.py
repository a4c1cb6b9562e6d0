"""Constants shared by decoding, the CLI, the app and the figures that draw decoding's records (no torch here, so viz/
can import them)."""

NEG = -1.0e9  # transformers' "impossible" score: beam placeholders and forbidden candidates
IMPOSSIBLE = NEG / 2  # a score at or below this is a placeholder, not a hypothesis
ATTRIBUTION_METHODS = ("ig", "ixg")  # integrated gradients, input × gradient (model.interpret.attribution)
# the decoder residual stream activation patching restores: after Add & Norm 1, 2, 3 (model.interpret.patching)
PATCH_SUBLAYERS = ("after self-attn", "after cross-attn", "after FFN")
# the widest beam the CLI, the app and DecodeOptions accept: wider ones gain nothing with these models and cost time
# and memory linearly (the app's shared step decoder is built for this many rows)
MAX_BEAM = 8
BATCH_SIZE = 32  # sentences decoded together by batched greedy decoding (the CLI's --batch-size, translate_corpus)
HEAD_SENTENCES = 200  # the corpus head table reads a set's first sentences (the CLI's --head-sentences)
