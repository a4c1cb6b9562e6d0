"""The example sentences the page offers are translated correctly by the bundled model, with the app's default
decoding and with beam search: each output is one of the French translations written down here."""

from __future__ import annotations

import pytest

from model.decode.decoding import DecodeOptions, decode
from model.io.checkpoint import default_model_dir, load_model_dir
from views.state import EXAMPLES

REFERENCES = {  # correct French translations, written by hand (any one of them counts)
    "I am a student.": ("Je suis étudiant.", "Je suis étudiante.", "Je suis un étudiant."),
    "I like pizza.": ("J'aime la pizza.", "J'aime les pizzas."),
    "Where is the station?": ("Où se trouve la gare ?", "Où est la gare ?"),
    "She is drinking coffee.": ("Elle boit du café.", "Elle est en train de boire du café."),
    "The cat is sleeping on the sofa.": ("Le chat dort sur le canapé.", "Le chat dort sur le sofa."),
    "Two dogs are playing in the snow.": ("Deux chiens jouent dans la neige.",),
    "A man in a blue shirt is standing on a ladder.": (
        "Un homme en chemise bleue est debout sur une échelle.",
        "Un homme en T-shirt bleu est debout sur une échelle.",
        "Un homme vêtu d'une chemise bleue se tient sur une échelle.",
    ),
    "The little girl is reading a book in the garden.": (
        "La petite fille lit un livre dans le jardin.",
        "La petite fille est en train de lire un livre dans le jardin.",
    ),
}


@pytest.fixture(scope="module")
def bundled():
    return load_model_dir(default_model_dir())


def test_every_example_has_a_reference():
    assert set(EXAMPLES) == set(REFERENCES)


@pytest.mark.parametrize("opts", [DecodeOptions(), DecodeOptions(strategy="beam", beam=5)], ids=["default", "beam5"])
def test_the_bundled_model_translates_every_example(bundled, opts):
    wrong = {}
    for text in EXAMPLES:
        src = [*bundled.tokenizer.encode(text), bundled.cfg.eos_id]
        out = bundled.tokenizer.decode(decode(bundled.model, src, opts).ids)
        if out not in REFERENCES[text]:
            wrong[text] = out
    assert not wrong, wrong
