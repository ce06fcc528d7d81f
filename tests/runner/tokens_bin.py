"""Writes a token file as nanoGPT's prepare scripts do (numpy's tofile of uint16 ids): DIR/tokens.bin,
20001 tokens of a sequence a bigram model can learn exactly, t[i + 1] = (3 t[i] + 1) mod 50.

  tokens_bin.py DIR
"""
import sys

import numpy as np

tokens = [1]
for _ in range(20000):
    tokens.append((3 * tokens[-1] + 1) % 50)
np.array(tokens, dtype=np.uint16).tofile(f"{sys.argv[1]}/tokens.bin")
