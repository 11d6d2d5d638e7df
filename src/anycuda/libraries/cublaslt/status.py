"""cuBLASLt answers with cuBLAS's statuses (cublasStatus_t)."""
from ..cublas.status import CublasError, Error, Status, status_name, status_text

__all__ = ["CublasError", "Error", "Status", "status_name", "status_text"]
