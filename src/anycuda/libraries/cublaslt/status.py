"""cuBLASLt answers with cuBLAS's statuses (cublasStatus_t)."""
from ..cublas.status import ANSWERS, CublasError, Error, Status, status_name, status_text

__all__ = ["ANSWERS", "CublasError", "Error", "Status", "status_name", "status_text"]
