"""What the property tests (test_props_*.py) found, each kept as a plain example: layouts and
byte orders the engine was handed wrongly, and shapes that came back changed."""
import numpy as np
import pytest

import precsim


def test_big_endian_float16_is_swapped_before_decoding():
    # '>f2' items were read as codes unswapped: 1.5 came back as 3.7e-06.
    x = np.array([1.5, -3.0, 65504.0, 2.0 ** -24], ">f2")
    want = np.array([1.5, -3.0, 65504.0, 2.0 ** -24], np.float32)
    assert precsim.quantize(x, "fp32").tobytes() == want.tobytes()
    assert precsim.encode(x, "fp16").tobytes() == np.array([0x3E00, 0xC200, 0x7BFF, 0x0001], np.uint16).tobytes()


def test_big_endian_codes_are_swapped_before_decoding():
    codes = np.array([0x3F80, 0xC000], ">u2")  # bf16 codes of 1.0 and -2.0
    assert precsim.decode(codes, "bf16").tolist() == [1.0, -2.0]


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.uint16, np.bool_])
def test_fortran_ordered_integers_are_accepted(dtype):
    # astype kept the Fortran order and the engine refused it with nanobind's signature dump.
    x = np.asfortranarray(np.array([[1, 0, 1], [0, 1, 1]], dtype))
    want = x.astype(np.float64)
    got = precsim.quantize(x, "bf16")
    assert got.flags.c_contiguous and got.tolist() == want.tolist()
    assert precsim.encode(x, "int8").tolist() == want.astype(np.uint8).tolist()


def test_zero_dimensional_codes_decode_to_a_zero_dimensional_array():
    # np.ascontiguousarray made the 0-d codes 1-d, and the result shape (1,).
    codes = precsim.encode(np.float32(1.5), "e4m3")
    assert codes.shape == ()
    back = precsim.decode(codes, "e4m3")
    assert back.shape == () and float(back) == 1.5


def test_analyze_of_a_0d_array_keeps_its_shape():
    # np.ascontiguousarray made it 1-d: "shape" said [1] where `precsim analyze` says [].
    got = precsim.analyze(np.array(3.0, np.float32), ["e4m3"])
    assert got["shape"] == [] and (got["rows"], got["cols"], got["count"]) == (1, 1, 1)


def test_a_nan_output_of_gemm_is_the_positive_quiet_nan_of_the_cli(cli, tmp_path):
    # inf - inf is x86's negative NaN: float C kept it, the CLI's C (rounded into fp32) did not.
    a = np.array([[np.inf, 1.0], [np.inf, -np.inf]], np.float32)
    b = np.array([[1.0], [1.0]], np.float32)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    cli("-q", "gemm", "--a", tmp_path / "a.npy", "--b", tmp_path / "b.npy", "--model", "fp32-seq", "--a-format", "fp32",
        "--b-format", "fp32", "--output", tmp_path / "c.npy", "--sample", 1)
    c = precsim.gemm(a, b, model="fp32-seq", a_format="fp32", b_format="fp32")
    assert c.view(np.uint32).tolist() == [[0x7F800000], [0x7FC00000]]
    assert c.tobytes() == np.load(tmp_path / "c.npy").tobytes()


@pytest.mark.parametrize("scheme", ["mxfp4", "nvfp4", "fp8_e4m3:row", "mxfp8_e4m3:axis=0"])
def test_an_empty_array_is_block_quantized_by_the_cli_too(cli, tmp_path, scheme):
    # `precsim quantize -f SCHEME` refused it ("the array is empty") where Python returns it.
    x = np.zeros((0, 64), np.float32)
    np.save(tmp_path / "x.npy", x)
    cli("quantize", "-q", "-f", scheme, "--input", tmp_path / "x.npy", "--output", tmp_path / "y.npy")
    cli("quantize", "-q", "-f", scheme, "--input", tmp_path / "x.npy", "--output", tmp_path / "c.npy", "--codes")
    assert np.load(tmp_path / "y.npy").shape == precsim.block_quantize(x, scheme).shape == (0, 64)
    enc = precsim.block_encode(x, scheme)
    assert np.load(tmp_path / "c.npy").shape == enc.codes.shape
    assert np.load(tmp_path / "c.scales.npy").tobytes() == enc.scales.tobytes()
