"""Write the golden vectors: small inputs with their exact compressed bytes.

    python tests/golden/make_golden.py

The vectors come from the numpy reference and pin the format: the model must reproduce
them byte for byte (tests/test_golden.py), and so must the RTL (the float32 ones, through
the sim/ benches). Regenerate them only for a deliberate format change, and say so in the
commit.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ceaz import codec
from ceaz.codec import Settings

HERE = Path(__file__).parent


def cases() -> dict[str, tuple[np.ndarray, dict]]:
    rng = np.random.default_rng(2021)
    yy, xx = np.mgrid[0:32, 0:48]
    smooth = (np.sin(xx / 5.0) * np.cos(yy / 7.0) * 40 + 280).astype(np.float32)

    esc = (np.cumsum(rng.standard_normal((4, 8, 16)), axis=2) * 3).astype(np.float32)
    esc[0, 0, 3] = np.nan
    esc[1, 2, 3] = np.inf
    esc[1, 2, 4] = -np.inf
    esc[2, :, 5] = -1e34  # fill
    esc[3, 1, 1] = 3e38  # too large to prequantize
    esc[3, 4, 7] = 1e-41  # subnormal
    esc[0, 5, 9] = 500.0  # outlier
    esc[2, 6, :] = np.float32(np.nan).view(np.uint32).__xor__(1).view(np.float32)  # NaN payload

    walk = np.cumsum(rng.standard_normal(1000)).astype(np.float32)
    f64 = np.cumsum(rng.standard_normal((20, 30)), axis=0)
    return {
        "smooth2d_f32": (smooth, dict(eb=1e-3, mode="rel", chunk_values=512)),
        "escapes3d_f32": (
            esc,
            dict(
                eb=0.05, mode="abs", radius=16, fill_value=-1e34, chunk_values=256, sync_interval=50
            ),
        ),
        "walk1d_f32": (walk, dict(eb=0.01, mode="abs", chunk_values=400, sync_interval=64)),
        "field2d_f64": (f64, dict(eb=1e-4, mode="rel", chunk_values=200)),
    }


def compress_case(x: np.ndarray, params: dict) -> bytes:
    p = dict(params)
    eb, mode = p.pop("eb"), p.pop("mode")
    return codec.compress(x, eb, mode, Settings(**p), use_jit=False)


def main() -> None:
    manifest = {}
    for name, (x, params) in cases().items():
        data = compress_case(x, params)
        np.save(HERE / f"{name}.in.npy", x)
        np.save(HERE / f"{name}.out.npy", codec.decompress(data, use_jit=False))
        (HERE / f"{name}.ceaz").write_bytes(data)
        manifest[name] = params
        print(f"{name}: {x.dtype}{x.shape} -> {len(data)} bytes")
    (HERE / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
