"""PyTorch's DataLoader, a peer of `mirra bench data`: the npz of Fashion-MNIST's training images
(written by tf_input_pipeline.py write) read into shuffled batches by a DataLoader over a Dataset of
its arrays (each example its u8 image and its label, as the other pipelines give them), with
`num_workers` worker processes; prints one JSON line (examples/s) after warm-up batches.

  torch_input_pipeline.py DIR --workers N [--batches B] [--batch-size S]
"""
import argparse
import json
import time

import numpy as np
import torch


class Images(torch.utils.data.Dataset):
    def __init__(self, path):
        with np.load(path) as archive:
            self.images, self.labels = archive["image"], archive["label"]

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return torch.from_numpy(self.images[i]), int(self.labels[i])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("dir")
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=128)
    args = parser.parse_args()
    torch.set_num_threads(1)
    loader = torch.utils.data.DataLoader(Images(f"{args.dir}/images.npz"), batch_size=args.batch_size, shuffle=True,
                                         num_workers=args.workers, generator=torch.Generator().manual_seed(1))
    iterator = iter(loader)

    def take():
        nonlocal iterator
        try:
            return next(iterator)
        except StopIteration:
            iterator = iter(loader)
            return next(iterator)

    for _ in range(10):
        take()
    start = time.perf_counter()
    for _ in range(args.batches):
        take()
    seconds = time.perf_counter() - start
    print(json.dumps({"framework": "pytorch DataLoader", "pytorch": torch.__version__, "num_workers": args.workers,
                      "batches": args.batches, "batch_size": args.batch_size,
                      "examples_per_s": args.batches * args.batch_size / seconds}))


if __name__ == "__main__":
    main()
