"""The first of a family of names that is free or already this user's own, as the driver and
vgpud choose them (vgpu/status/status_region.cpp, simcore/daemon/job_paths.cpp): "<base>", then
"<base><sep>1" .. "<base><sep>7", skipping a name someone else took first (another user's file,
a symlink), so that no other user can hand vgpu-run a file or folder of theirs."""
import os


def first_own(base, sep, is_own):
    """The first name that is absent or whose lstat() `is_own` accepts; `base` if none is."""
    for k in range(8):
        path = base if k == 0 else f"{base}{sep}{k}"
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return path
        except OSError:
            continue
        if is_own(st):
            return path
    return base
