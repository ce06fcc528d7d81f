"""Writes bags of ids as a user with numpy would: DIR/bags.npz (np.savez: "ids" i64[4096, IDS]
uniform in [0, ROWS), named as the embedding_bag example's placeholder, and "labels" i64[4096], each
bag's first id modulo 10).

  bags_npz.py ROWS IDS DIR
"""
import sys

import numpy as np

rows, ids, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
bags = np.random.default_rng(7).integers(0, rows, size=(4096, ids), dtype=np.int64)
np.savez(f"{out}/bags.npz", ids=bags, labels=bags[:, 0] % 10)
