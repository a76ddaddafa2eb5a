"""Approximate distinct counts with Apache DataSketches HLL sketches (Druid's HLLSketchBuild).

HLL is idempotent, so a segment feeds each group's sketch once per *distinct* value rather than
once per row: for a dictionary column that is one update per (group, dictionary id) pair, found
with vectorized numpy. The intermediate is the serialized sketch, merged per group by the
vectorized union of ``hll_union`` (the datasketches union when an input is in another form).
"""

from __future__ import annotations

from dataclasses import dataclass

import datasketches as ds
import numpy as np
import pyarrow as pa

from common.errors import ValidationError
from common.query.aggregators import Aggregator, _input, _input_type
from common.query.hll_union import union_images
from common.types.column_type import DOUBLE, LONG


def _estimate_image(blob: bytes, lg_k: int) -> float:
    """The estimate of one serialized sketch."""
    # A sketch built row by row would use its in-order (HIP) estimator while a merged one
    # (across segments, or from a projection's stored sketches) uses the composite one, and
    # the same registers would give two answers.
    # A union copies the first sketch it sees as is; merging the same sketch again marks it
    # merged, so every sketch is estimated the same way whatever its history.
    sketch = ds.hll_sketch.deserialize(blob)
    union = ds.hll_union(lg_k)
    union.update(sketch)
    union.update(sketch)
    return union.get_estimate()


@dataclass(frozen=True)
class HllSketch(Aggregator):
    field_name: str | None = None
    expression: str | None = None
    lg_k: int = 12
    round: bool = False
    combines_concatenated = False  # each stored column is decoded once, kept with its segment (combine_parts)

    def __post_init__(self) -> None:
        if not 4 <= self.lg_k <= 21:
            raise ValidationError(f"aggregator '{self.name}': lgK must be within 4..21, got {self.lg_k}")
        if self.field_name is None and self.expression is None:
            raise ValidationError(f"aggregator '{self.name}' (HLLSketchBuild) needs 'fieldName' or 'expression'")

    def columns(self):
        if self.expression is not None:
            from common.expr import parse

            return frozenset(parse(self.expression).columns())
        return frozenset([self.field_name])

    def result_type(self, types):
        return LONG if self.round else DOUBLE

    def _sketches(self, groups: int) -> list:
        return [ds.hll_sketch(self.lg_k, ds.tgt_hll_type.HLL_4) for _ in range(groups)]

    def _serialize(self, sketches) -> pa.Array:
        return pa.array([s.serialize_compact() for s in sketches], pa.binary())

    def accumulate(self, cols, gid, groups):
        _input_type(cols.types(), self.field_name, self.expression)  # unknown columns fail loudly
        sketches = self._sketches(groups)
        stored = cols.stored_codes(self.field_name) if self.expression is None else None
        if stored is not None:
            codes, dictionary = stored
            self._update_from_codes(sketches, gid, codes, dictionary)
            return self._serialize(sketches)
        arr = _input(cols, self.field_name, self.expression)
        if pa.types.is_dictionary(arr.type):
            codes = arr.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
            self._update_from_codes(sketches, gid, codes, arr.dictionary)
            return self._serialize(sketches)
        if pa.types.is_timestamp(arr.type):
            arr = arr.cast(pa.int64())
        pairs = pa.table({"g": pa.array(gid, pa.int64()), "v": arr}).filter(arr.is_valid())
        distinct = pairs.group_by(["g", "v"], use_threads=False).aggregate([])
        for g, v in zip(distinct.column("g").to_pylist(), distinct.column("v").to_pylist()):
            sketches[g].update(v)
        return self._serialize(sketches)

    @staticmethod
    def _update_from_codes(sketches, gid, codes, dictionary) -> None:
        valid = codes >= 0
        width = len(dictionary) + 1
        keys = gid[valid].astype(np.int64) * width + codes[valid]
        space = len(sketches) * width
        if space <= max(8 * len(keys), 1 << 20):
            # A presence table finds distinct (group, value) pairs in one pass, without a sort.
            present = np.zeros(space, dtype=bool)
            present[keys] = True
            pairs = np.flatnonzero(present)
        else:
            pairs = np.unique(keys)
        groups_of, ids = pairs // width, pairs % width
        values = dictionary.take(pa.array(ids)).to_pylist()
        for g, v in zip(groups_of.tolist(), values):
            sketches[g].update(v)

    def combine(self, values, gid, groups, keep=None):
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        merged = union_images(values, gid, groups, self.lg_k, keep)
        if merged is not None:
            return merged
        unions = [ds.hll_union(self.lg_k) for _ in range(groups)]
        for g, blob in zip(gid.tolist(), values.to_pylist()):
            if blob is not None:
                unions[g].update(ds.hll_sketch.deserialize(blob))
        return pa.array([u.get_result(ds.tgt_hll_type.HLL_4).serialize_compact() for u in unions], pa.binary())

    def combine_parts(self, parts, gids, groups, keeps=None):
        """Each source's sketches unioned per group as one segment's run would, then those unions
        per group, as a merge of the segments' partials would. A part that is a whole stored column
        (its ``keeps`` entry set) is decoded once and the decoding kept with its segment's file,
        charged to the node's part budget and dropped when the file closes (``hll_union``); never
        a union's result, so a repeated query costs what its first run's merging cost."""
        images, ids = [], []
        keeps = keeps if keeps is not None else [None] * len(parts)
        for part, gid, keep in zip(parts, gids, keeps):
            if not len(gid):
                continue
            uniq, local = np.unique(gid, return_inverse=True)
            images.append(self.combine(part, local.reshape(-1).astype(np.int64), len(uniq), keep))
            ids.append(uniq)
        if not images:
            out = self.combine(pa.array([], pa.binary()), np.zeros(0, np.int64), groups)
        else:
            out = self.combine(pa.concat_arrays(images) if len(images) > 1 else images[0],
                               np.concatenate(ids).astype(np.int64), groups)
        return out

    def finalize(self, values):
        estimates = [0.0 if b is None else _estimate_image(b, self.lg_k) for b in values.to_pylist()]
        arr = pa.array(estimates, pa.float64())
        return pa.array(np.rint(arr.to_numpy()).astype(np.int64)) if self.round else arr

    def accumulate_empty(self, types, groups):
        return self._serialize(self._sketches(groups))

    def _estimate(self, blob: bytes) -> float:
        return _estimate_image(blob, self.lg_k)

    def to_json(self):
        out = {"type": "HLLSketchBuild", "name": self.name, "lgK": self.lg_k}
        if self.expression is not None:
            out["expression"] = self.expression
        else:
            out["fieldName"] = self.field_name
        if self.round:
            out["round"] = True
        return out
