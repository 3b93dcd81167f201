"""Writing a checkpoint's bytes: a zip archive of stored (uncompressed) records with 64-byte aligned
data, as torch's writer lays it out, and the atomic replace of a file by path (temporary file, fsync,
rename)."""
import os
import struct
import tempfile
import zlib

import numpy as np

_ALIGN = 64           # data alignment of records (torch's default ``.storage_alignment``)
_FORCE_ZIP64 = False  # tests set this to exercise the zip64 structures on small files


class _ZipWriter:
    """Writes a zip archive of stored records to a binary stream, sequentially (no seeks).

    Each record's data starts at a multiple of 64 bytes (padding goes into an extra field of the local
    header, as torch's writer does). Zip64 structures are used where sizes or offsets need them.
    """

    _DOS_DATE = (0 << 9) | (1 << 5) | 1  # 1980-01-01, so that equal objects give equal files

    def __init__(self, stream):
        self.f = stream
        self.pos = 0
        self.entries = []

    def _write(self, b):
        self.f.write(b)
        self.pos += len(b)

    def write_record(self, name, data):
        """``data``: bytes or a C-contiguous numpy array (written without a copy)."""
        if isinstance(data, np.ndarray):
            mv = memoryview(np.ascontiguousarray(data).reshape(-1).view(np.uint8))
        else:
            mv = memoryview(data).cast("B")
        size = mv.nbytes
        crc = zlib.crc32(mv)
        fname = name.encode("utf-8")
        offset = self.pos
        zip64 = _FORCE_ZIP64 or size >= 0xFFFFFFFF or offset >= 0xFFFFFFFF
        extra = struct.pack("<HHQQ", 1, 16, size, size) if zip64 else b""
        pad = (-(offset + 30 + len(fname) + len(extra))) % _ALIGN
        if pad:
            if pad < 4:
                pad += _ALIGN
            extra += b"FB" + struct.pack("<H", pad - 4) + b"Z" * (pad - 4)
        small = 0xFFFFFFFF if zip64 else size
        self._write(struct.pack("<IHHHHHIIIHH", 0x04034B50, 45 if zip64 else 20, 0, 0, 0, self._DOS_DATE, crc,
                                small, small, len(fname), len(extra)) + fname + extra)
        self.f.write(mv)
        self.pos += size
        self.entries.append((fname, crc, size, offset))

    def finish(self):
        cd_start = self.pos
        for fname, crc, size, offset in self.entries:
            big = []
            if _FORCE_ZIP64 or size >= 0xFFFFFFFF:
                big += [size, size]
            if _FORCE_ZIP64 or offset >= 0xFFFFFFFF:
                big.append(offset)
            extra = struct.pack("<HH", 1, 8 * len(big)) + struct.pack(f"<{len(big)}Q", *big) if big else b""
            s32 = 0xFFFFFFFF if big and len(big) != 1 else size
            o32 = 0xFFFFFFFF if len(big) in (1, 3) else offset
            ver = 45 if big else 20
            self._write(struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, ver, ver, 0, 0, 0, self._DOS_DATE, crc, s32,
                                    s32, len(fname), len(extra), 0, 0, 0, 0, o32) + fname + extra)
        cd_size = self.pos - cd_start
        n = len(self.entries)
        if _FORCE_ZIP64 or n >= 0xFFFF or cd_size >= 0xFFFFFFFF or cd_start >= 0xFFFFFFFF:
            eocd64 = self.pos
            self._write(struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, n, n, cd_size, cd_start))
            self._write(struct.pack("<IIQI", 0x07064B50, 0, eocd64, 1))
            self._write(struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0))
        else:
            self._write(struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, n, n, cd_size, cd_start, 0))



def _umask():
    try:
        with open("/proc/self/status") as s:
            for line in s:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    m = os.umask(0o22)
    os.umask(m)
    return m


def _atomic_write(path, write):
    path = os.path.realpath(path)
    folder, base = os.path.split(path)
    if os.path.isdir(path):
        raise IsADirectoryError(f"cltorch.save: {path} is a directory")
    fd, tmp = tempfile.mkstemp(prefix=f".{base}.", suffix=".tmp", dir=folder)
    try:
        try:
            mode = os.stat(path).st_mode & 0o7777
        except FileNotFoundError:
            mode = 0o666 & ~_umask()
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb", buffering=1 << 20) as out:
            fd = None
            write(out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
        tmp = None
        try:
            dfd = os.open(folder, os.O_RDONLY)
        except OSError:
            return
        try:
            os.fsync(dfd)
        except OSError:
            pass
        finally:
            os.close(dfd)
    finally:
        if fd is not None:
            os.close(fd)
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass

