"""The names and constants of torch's checkpoint format that the writer and the reader share: storage
class names per dtype, torch's dtype globals, the legacy format's magic number."""

# --------------------------------------------------------------------------------------------- dtypes
_STORAGE_NAME = {  # cltorch dtype name -> torch legacy storage class name
    "float32": "FloatStorage", "float64": "DoubleStorage", "float16": "HalfStorage", "int64": "LongStorage",
    "int32": "IntStorage", "int16": "ShortStorage", "int8": "CharStorage", "uint8": "ByteStorage",
    "bool": "BoolStorage", "complex64": "ComplexFloatStorage", "complex128": "ComplexDoubleStorage",
}
_STORAGE_DTYPE = {v: k for k, v in _STORAGE_NAME.items()}
# torch storage types that exist but have no cltorch dtype: loading them gives a clear error
_UNSUPPORTED_STORAGES = {
    "BFloat16Storage": "bfloat16",
    "QInt8Storage": "qint8", "QUInt8Storage": "quint8", "QInt32Storage": "qint32", "QUInt4x2Storage": "quint4x2",
    "QUInt2x4Storage": "quint2x4",
}
# torch dtype globals (``torch.float32`` etc.) -> cltorch dtype name
_TORCH_DTYPES = {
    "float32": "float32", "float": "float32", "float64": "float64", "double": "float64", "float16": "float16",
    "half": "float16", "int64": "int64", "long": "int64", "int32": "int32", "int": "int32", "int16": "int16",
    "short": "int16", "int8": "int8", "uint8": "uint8", "bool": "bool", "complex64": "complex64",
    "cfloat": "complex64", "complex128": "complex128", "cdouble": "complex128",
}
_LEGACY_MAGIC = b"\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19"  # pickled torch MAGIC_NUMBER


def _parameter_class():
    """cltorch.nn.Parameter, or None where cltorch.nn cannot be imported (a tensor-only install)."""
    try:
        from ..nn.parameter import Parameter
        return Parameter
    except ImportError:
        try:
            from ..nn import Parameter
            return Parameter
        except ImportError:
            return None
