"""The encoder loader's old place: it lives in memsearch.encoder_loading (outside this package, which a
search that does not embed does not import)."""

from memsearch.encoder_loading import EncoderLoader as EncoderLoader
