"""The base of cairn's exceptions; the class per code is generated (cairn.errors)."""
from __future__ import annotations

from typing import Optional


class CairnError(RuntimeError):
    """A cairn call failed. Subclasses stand for the CAIRN_ERR_* codes (cairn.errors).

    Attributes: `code` (the negative CAIRN_ERR_* value), `code_name` ("CAIRN_ERR_..."), `description`
    (cairn_strerror's text), `call` (the C call that failed, e.g. "cairn_restart") and `detail`
    (cairn_last_error(): rank, path, errno, level; or the binding's own reason).
    """

    code: int = 0
    code_name: str = ""
    description: str = ""

    def __init__(self, message: str, *, call: Optional[str] = None, detail: Optional[str] = None,
                 code: Optional[int] = None) -> None:
        super().__init__(message)
        self.call = call
        self.detail = detail
        if code is not None and code != type(self).code:
            self.code = code  # a code this version of the binding does not know
