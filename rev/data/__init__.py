"""Text to token files: `python -m rev prepare` and what reads its output.

`tokens` (the token files of `data/<name>/`, `load`), `corpus` (`prepare`: a source -> BPE tokenizer -> token files),
`tinystories` (the TinyStories source, or a local copy in the hub's layout), `stories` + `story_words` (the synthetic
stories the project makes, offline). Imports `rev.base` and `rev.core` only.
"""
