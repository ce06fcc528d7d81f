"""Writes a regression data set as a user with numpy would: DIR/regression.csv (np.savetxt, a header
x1,x2,x3,y; 1000 rows of y = x . (1.5, -2, 0.5) + 0.3 + noise) and DIR/least_squares.json, numpy's
least-squares weights and bias for it (float64), which full-batch training must reach.

  regression_csv.py DIR
"""
import json
import sys

import numpy as np

out = sys.argv[1]
rng = np.random.default_rng(7)
x = rng.normal(size=(1000, 3))
y = x @ np.array([1.5, -2.0, 0.5]) + 0.3 + 0.1 * rng.normal(size=1000)
np.savetxt(f"{out}/regression.csv", np.column_stack([x, y]), fmt="%.17g", delimiter=",", header="x1,x2,x3,y", comments="")
# The values mirra reads are rounded to float32, as its placeholders are: solve for those.
x32, y32 = x.astype(np.float32).astype(np.float64), y.astype(np.float32).astype(np.float64)
solution = np.linalg.lstsq(np.column_stack([x32, np.ones(1000)]), y32, rcond=None)[0]
with open(f"{out}/least_squares.json", "w") as f:
    json.dump({"w": solution[:3].tolist(), "b": float(solution[3])}, f)
