"""NumPy's side of tests/runtime/numpy_file_test.cc.

  numpy_files.py write DIR   numpy writes the arrays the test reads: every dtype mirra reads, as .npy,
                             in a stored .npz (np.savez) and a deflated one (np.savez_compressed), each
                             also as raw little-endian bytes (DIR/<name>.bin) to compare with; and the
                             arrays mirra must refuse.
  numpy_files.py check DIR   numpy reads what mirra wrote (DIR/written.npy, DIR/written.npz) and checks
                             the values; prints "ok" or raises.
"""
import sys

import numpy as np

DTYPES = ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float16", "float32",
          "float64"]


def values(dtype, shape):
    """Values of `dtype` that exercise its range: extremes, negatives where it has them, fractions."""
    n = int(np.prod(shape))
    if dtype == "bool":
        return (np.arange(n) % 3 == 0).reshape(shape)
    info = np.iinfo(dtype) if np.dtype(dtype).kind in "iu" else np.finfo(dtype)
    base = np.arange(n, dtype=np.float64) * 7.25 - 3 * n
    if np.dtype(dtype).kind in "iu":
        out = (np.arange(n, dtype=np.int64) * 37 - (n if info.min < 0 else 0)).astype(dtype)
        flat = out.reshape(-1)
        if n >= 2:
            flat[0], flat[1] = info.min, info.max
        return out.reshape(shape)
    out = base.astype(dtype)
    flat = out.reshape(-1)
    if n >= 2:
        flat[0], flat[1] = info.max, info.tiny
    return out.reshape(shape)


def write(directory):
    arrays = {}
    for dtype in DTYPES:
        arrays[dtype] = values(dtype, (5, 3, 2))
    for name, array in arrays.items():
        np.save(f"{directory}/{name}.npy", array)
        array.astype(array.dtype.newbyteorder("<")).tofile(f"{directory}/{name}.bin")
    np.savez(f"{directory}/stored.npz", **arrays)
    np.savez_compressed(f"{directory}/compressed.npz", **arrays)
    # A data set: 7 examples of x f32[4] and y i64 (and an empty array of none).
    np.savez(f"{directory}/examples.npz", x=np.arange(28, dtype=np.float32).reshape(7, 4) / 4,
             y=np.arange(7, dtype=np.int64) % 3)
    np.save(f"{directory}/empty.npy", np.zeros((0, 4), dtype=np.float32))
    np.save(f"{directory}/scalar.npy", np.float64(2.5))
    np.save(f"{directory}/fewer.npy", np.zeros(6, dtype=np.int32))
    # Refused: Fortran order, big-endian, object, structured, complex, strings.
    np.save(f"{directory}/fortran.npy", np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3)))
    np.save(f"{directory}/big_endian.npy", np.arange(4, dtype=">f4"))
    np.save(f"{directory}/objects.npy", np.array([1, "a"], dtype=object), allow_pickle=True)
    np.save(f"{directory}/structured.npy", np.zeros(3, dtype=[("a", "<i4"), ("b", "<f8")]))
    np.save(f"{directory}/complex.npy", np.zeros(3, dtype=np.complex64))
    np.save(f"{directory}/strings.npy", np.array(["ab", "cd"]))


def check(directory):
    expected = np.arange(24, dtype=np.float32).reshape(2, 3, 4) * 0.5
    written = np.load(f"{directory}/written.npy")
    assert written.dtype == np.float32 and written.shape == (2, 3, 4), (written.dtype, written.shape)
    assert np.array_equal(written, expected)
    with np.load(f"{directory}/written.npz") as archive:
        assert sorted(archive.files) == ["counts", "scores"], archive.files
        assert np.array_equal(archive["scores"], expected)
        assert archive["counts"].dtype == np.int64 and np.array_equal(archive["counts"], np.array([3, -1, 7]))
    print("ok")


if __name__ == "__main__":
    {"write": write, "check": check}[sys.argv[1]](sys.argv[2])
