"""The position's records download: every array as it was recorded, in an NPZ stored without compression (deflating
it was most of the server's time for the click, which a class's clicks share)."""

from __future__ import annotations

import io
import zipfile

import numpy as np

from views import export


def test_the_records_are_stored_uncompressed_and_read_back_as_they_were():
    rng = np.random.default_rng(0)
    arrays = {"dec.0.self.weights": rng.random((2, 4, 3, 3), dtype=np.float32), "tokens": np.array(["<s>", "▁le"])}
    data = export.npz_bytes(arrays)
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        assert [i.compress_type for i in z.infolist()] == [zipfile.ZIP_STORED] * 2
    with np.load(io.BytesIO(data), allow_pickle=False) as z:
        assert sorted(z.files) == sorted(arrays)
        for k, v in arrays.items():
            np.testing.assert_array_equal(z[k], v)
            assert z[k].dtype == v.dtype
