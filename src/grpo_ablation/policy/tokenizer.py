"""A character-level tokenizer built locally, saved as a standard ``tokenizer.json``.

It is a byte-pair model with no merges (so every character is one token) and a ``Fuse`` decoder
(so decoding concatenates characters). Saved with the model, it loads with ``AutoTokenizer`` in
TRL and lm-eval without custom code. lm-eval's ``generate_until`` needs an eos token; padding is
on the left because GRPO generates from left-padded prompts.
"""

from __future__ import annotations

import string

from tokenizers import Tokenizer, decoders, models
from transformers import PreTrainedTokenizerFast

PAD, EOS, UNK = "<pad>", "<eos>", "<unk>"
# Digits first, then the symbols the tasks use, then letters for prompts in words.
ALPHABET = string.digits + "+-*=.,:;?! #()[]" + string.ascii_lowercase + string.ascii_uppercase


def build_char_tokenizer(alphabet: str = ALPHABET) -> PreTrainedTokenizerFast:
    vocab = {tok: i for i, tok in enumerate([PAD, EOS, UNK, *dict.fromkeys(alphabet)])}
    core = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token=UNK))
    core.decoder = decoders.Fuse()
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core,
        pad_token=PAD,
        eos_token=EOS,
        unk_token=UNK,
        padding_side="left",
        model_max_length=10_000,
    )
    return tok
