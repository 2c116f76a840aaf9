"""The command line of `controller.config` (pure): its flags as data (`declarations`), the argparse
parser built from them with Go's flag syntax (`parser`), and the per-flag value checks (`values`).
"""
