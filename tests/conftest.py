"""Shared fixtures: the tiny seeded model and tokenizer of ``model.testing``, built once per session."""

from __future__ import annotations

import pytest

from model import Transformer
from model.testing import build_tiny_model_dir, make_model, make_tokenizer
from model.tokenizer import Tokenizer


@pytest.fixture(scope="session")
def tiny_tokenizer() -> Tokenizer:
    return make_tokenizer()


@pytest.fixture(scope="session")
def tiny_model(tiny_tokenizer) -> Transformer:
    return make_model(tiny_tokenizer.vocab_size)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    return build_tiny_model_dir(tmp_path_factory.mktemp("models") / "tiny")
