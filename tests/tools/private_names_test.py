"""vgpu-run's choice of the job's private names (vgpu/tools/vgpu_run/private_names.py), shared by
the daemon's folder and the status region's file: the first absent name, or the first one that is
this user's own kind of thing; a name someone else took first (here: a symlink, a file where a
folder is wanted) is skipped for "<base><sep>1" and on."""
import os
import stat
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.environ["VGPU_SOURCE_ROOT"], "vgpu", "tools"))
from vgpu_run.private_names import first_own  # noqa: E402


def is_own_dir(st):
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid()


def is_own_file(st):
    return stat.S_ISREG(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o077


class PrivateNames(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.base = os.path.join(self.tmp.name, "vgpu-job")

    def tearDown(self):
        self.tmp.cleanup()

    def test_an_absent_name_is_taken(self):
        self.assertEqual(first_own(self.base, "+", is_own_file), self.base)

    def test_an_own_name_is_taken_again(self):
        os.mkdir(self.base, 0o700)
        self.assertEqual(first_own(self.base, ".", is_own_dir), self.base)

    def test_names_someone_else_took_are_skipped(self):
        with open(self.base, "w"):
            pass  # a file where the daemon wants a folder
        os.symlink("/etc/passwd", self.base + ".1")  # a symlink planted under the next name
        self.assertEqual(first_own(self.base, ".", is_own_dir), self.base + ".2")

    def test_a_file_open_to_others_is_not_the_regions(self):
        with open(self.base, "w"):
            pass
        os.chmod(self.base, 0o644)
        self.assertEqual(first_own(self.base, "+", is_own_file), self.base + "+1")
        os.chmod(self.base, 0o600)
        self.assertEqual(first_own(self.base, "+", is_own_file), self.base)

    def test_when_every_name_is_taken_the_base_is_answered(self):
        for k in range(8):
            os.symlink("/nonexistent", self.base if k == 0 else f"{self.base}+{k}")
        self.assertEqual(first_own(self.base, "+", is_own_file), self.base)


if __name__ == "__main__":
    unittest.main()
