# Type stubs of hedgedb.encoders (the extension module hedgedb._encoders).
from typing import Any, Dict, List, Optional

import numpy as np
import numpy.typing as npt

from . import DB

class Model:
    def __init__(self, path: str, *, threads: int = 0) -> None: ...
    @property
    def spec(self) -> Dict[str, Any]: ...
    @property
    def create_kwargs(self) -> Dict[str, Any]: ...
    @property
    def calibration_map(self) -> Optional[bytes]: ...
    @property
    def calibration(self) -> Optional[Dict[str, Any]]: ...
    def embed_images(
        self,
        paths: List[str],
        *,
        fit: str = "",
        batch_size: int = 256,
        queries: bool = False,
        db: Optional[DB] = None,
        collection: Optional[str] = None,
    ) -> Dict[str, npt.NDArray[Any]]: ...
    def embed_arrays(
        self,
        inputs: npt.ArrayLike,
        *,
        batch_size: int = 256,
        queries: bool = False,
        db: Optional[DB] = None,
        collection: Optional[str] = None,
    ) -> Dict[str, npt.NDArray[Any]]: ...
