# Type stubs of hedgedb.encoders (the extension module hedgedb._encoders).
from typing import Any, Dict, List

import numpy as np
import numpy.typing as npt

class Model:
    def __init__(self, path: str, *, threads: int = 0) -> None: ...
    @property
    def spec(self) -> Dict[str, Any]: ...
    @property
    def create_kwargs(self) -> Dict[str, Any]: ...
    def embed_images(
        self, paths: List[str], *, fit: str = "", batch_size: int = 256, queries: bool = False
    ) -> Dict[str, npt.NDArray[Any]]: ...
    def embed_arrays(
        self, inputs: npt.ArrayLike, *, batch_size: int = 256, queries: bool = False
    ) -> Dict[str, npt.NDArray[Any]]: ...
