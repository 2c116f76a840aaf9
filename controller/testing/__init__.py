"""Test doubles for the controller's I/O boundaries (kept in step with the real clients by the
contract tests). Not shipped in the wheel or the image."""
