# Type stubs of the hedgedb package (the extension module hedgedb._hedgedb).
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import numpy.typing as npt

ArrayLike = npt.ArrayLike

class Error(Exception): ...
class NotFoundError(Error, KeyError): ...
class InvalidArgumentError(Error, ValueError): ...
class MatchParametersWarning(UserWarning): ...

class SearchResults:
    ids: npt.NDArray[np.int64]
    scores: npt.NDArray[np.float32]
    probs: npt.NDArray[np.float32]
    uncertainties: npt.NDArray[np.float32]
    std_errors: npt.NDArray[np.float32]
    labels: npt.NDArray[np.int64]
    query_uncertainty: npt.NDArray[np.float32]
    payloads: List[List[bytes]]
    scored: npt.NDArray[np.int64]
    passing: npt.NDArray[np.int64]

class DB:
    def close(self) -> None: ...
    def __enter__(self) -> "DB": ...
    def __exit__(self, *args: Any) -> None: ...
    def create_collection(
        self,
        name: str,
        kind: str,
        dim: int,
        components: int = 1,
        code_k: int = 0,
        index: str = "",
        match_a: float = 1.0,
        match_b: float = 0.0,
        samples: int = 0,
        seed: int = 0,
        metadata: str = "",
    ) -> None: ...
    def drop_collection(self, name: str) -> None: ...
    def list_collections(self) -> List[str]: ...
    def describe(self, name: str) -> Dict[str, Any]: ...
    def ingest(
        self,
        collection: str,
        *,
        vec: Optional[ArrayLike] = None,
        mean: Optional[ArrayLike] = None,
        var: Optional[ArrayLike] = None,
        std: Optional[ArrayLike] = None,
        log_var: Optional[ArrayLike] = None,
        log_std: Optional[ArrayLike] = None,
        weights: Optional[ArrayLike] = None,
        codes: Optional[ArrayLike] = None,
        ids: Optional[ArrayLike] = None,
        labels: Optional[ArrayLike] = None,
        payloads: Optional[Sequence[Union[str, bytes]]] = None,
        token: str = "",
        upsert: bool = False,
    ) -> npt.NDArray[np.int64]: ...
    def search(
        self,
        collection: str,
        *,
        vec: Optional[ArrayLike] = None,
        mean: Optional[ArrayLike] = None,
        var: Optional[ArrayLike] = None,
        std: Optional[ArrayLike] = None,
        log_var: Optional[ArrayLike] = None,
        log_std: Optional[ArrayLike] = None,
        weights: Optional[ArrayLike] = None,
        logp: Optional[ArrayLike] = None,
        k: int = 10,
        score: str = "",
        samples: int = 0,
        seed: Optional[int] = None,
        exhaustive: bool = False,
        candidates: int = 0,
        nprobe: int = 0,
        ef_search: int = 0,
        with_uncertainty: bool = True,
        with_payload: bool = False,
        adaptive_samples: bool = False,
        min_prob: float = 0.0,
        max_results: int = 1000,
        coverage: float = 0.0,
        coverage_by_eta: bool = False,
        max_false_match_rate: float = 0.0,
        confidence: float = 0.95,
        labels_in: Optional[ArrayLike] = None,
        labels_not_in: Optional[ArrayLike] = None,
        payload_equals: Optional[Dict[str, Union[str, int, float, bool, None]]] = None,
    ) -> SearchResults: ...
    def calibrate(
        self,
        collection: str,
        *,
        vec: Optional[ArrayLike] = None,
        mean: Optional[ArrayLike] = None,
        var: Optional[ArrayLike] = None,
        std: Optional[ArrayLike] = None,
        log_var: Optional[ArrayLike] = None,
        log_std: Optional[ArrayLike] = None,
        weights: Optional[ArrayLike] = None,
        logp: Optional[ArrayLike] = None,
        query_labels: Optional[ArrayLike] = None,
        score: str = "",
        samples: int = 0,
        seed: Optional[int] = None,
        max_pairs: int = 1000000,
        sample_seed: int = 0,
        top_ranks: int = 0,
        conformal_fraction: float = 0.0,
        unconditional: bool = False,
        dry_run: bool = False,
    ) -> Dict[str, Any]: ...
    def import_calibration(
        self, collection: str, map: Optional[bytes], *, base_rate: float = 0.0
    ) -> None: ...
    def get(self, collection: str, ids: ArrayLike) -> List[Dict[str, Any]]: ...
    def remove(self, collection: str, ids: ArrayLike) -> int: ...
    def list_ids(self, collection: str) -> npt.NDArray[np.int64]: ...
    def stats(self, collection: str) -> Dict[str, Any]: ...
    def flush(self) -> None: ...
    def catch_up(self) -> None: ...

def open(
    path: str,
    *,
    create_if_missing: bool = True,
    error_if_exists: bool = False,
    sync: bool = False,
    threads: int = 0,
    read_only: bool = False,
    index_recheck_fraction: float = 0.1,
    index_retrain_recall: float = 0.97,
    index_retrain_imbalance: float = 1.5,
    index_upkeep_inline: bool = False,
) -> DB: ...
def fuse_gaussians(
    mean: ArrayLike,
    var: Optional[ArrayLike] = None,
    *,
    std: Optional[ArrayLike] = None,
    log_var: Optional[ArrayLike] = None,
    log_std: Optional[ArrayLike] = None,
) -> Tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
    """Template fusion: the n Gaussians of mean (n, D) and var (n, D) (or std,
    log_var, log_std) merged into their normalised product, as PFE fuses the
    images of one face: per dimension 1/var = sum 1/var_i and
    mean = var * sum mean_i/var_i, computed in double. Returns (mean, var),
    float32 arrays of shape (D,). Rows are checked as ingest checks them.
    Gaussians only: a product of mixtures has C^n components, and points and
    codes have no density to multiply."""
    ...

def score_matrix(
    kind: str,
    queries: Dict[str, ArrayLike],
    items: Dict[str, ArrayLike],
    *,
    score: str = "",
    samples: int = 0,
    seed: int = 0,
    match_a: float = 1.0,
    match_b: float = 0.0,
) -> npt.NDArray[np.float32]:
    """Scores of every query against every item without a database: the
    numbers an exhaustive search of a collection of this kind, match_a/b,
    samples and seed returns. queries: the arrays search takes; items: the
    arrays ingest takes (dicts, e.g. Model.embed_images' output). Returns
    float32 (Q, N), [q, i] = item i's score for query q."""
    ...

def _conversions() -> int: ...
