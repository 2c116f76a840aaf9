"""The control plane's throwaway certificates, made with the openssl CLI.

`ControlPlanePki.create(dir, clients)` writes a CA, a loopback serving certificate, one client
certificate per entry of `clients` (file name -> subject) and the service-account key pair.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from controller.sandbox.processes import SandboxError, run_tool


@dataclass(frozen=True, slots=True)
class ControlPlanePki:
    """A throwaway CA, a loopback serving certificate, client certificates and the SA key."""

    dir: Path
    ca_cert: Path
    ca_key: Path
    server_cert: Path
    server_key: Path
    sa_key: Path
    sa_pub: Path

    def client(self, name: str) -> tuple[Path, Path]:
        """(certificate, key) of the client certificate `name` made by `create`."""
        return self.dir / f"{name}.crt", self.dir / f"{name}.key"

    @classmethod
    def create(cls, directory: Path, clients: Mapping[str, str]) -> ControlPlanePki:
        """`clients` maps a file name to the subject of its client certificate."""
        if shutil.which("openssl") is None:
            raise SandboxError(
                "the control plane's certificates need the openssl CLI (Debian: openssl)"
            )
        d = directory
        d.mkdir(parents=True, exist_ok=True)
        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        run_tool(
            ["openssl", "req", "-x509", *ec, "-keyout", str(d / "ca.key"),
             "-out", str(d / "ca.crt"), "-subj", "/CN=kube-ovn-sandbox-ca", "-days", "7",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign"]
        )  # fmt: skip
        leaves = {"server": ("/CN=127.0.0.1", "serverAuth", True)}
        leaves.update({name: (subj, "clientAuth", False) for name, subj in clients.items()})
        for name, (subject, usage, san) in leaves.items():
            ext = d / f"{name}.ext"
            lines = [
                "basicConstraints=critical,CA:FALSE",
                "keyUsage=critical,digitalSignature,keyEncipherment",
                f"extendedKeyUsage={usage}",
            ]
            if san:
                lines.append("subjectAltName=IP:127.0.0.1,DNS:localhost")
            ext.write_text("\n".join(lines) + "\n", encoding="utf-8")
            run_tool(
                ["openssl", "req", "-new", *ec, "-keyout", str(d / f"{name}.key"),
                 "-out", str(d / f"{name}.csr"), "-subj", subject]
            )  # fmt: skip
            run_tool(
                ["openssl", "x509", "-req", "-in", str(d / f"{name}.csr"),
                 "-CA", str(d / "ca.crt"), "-CAkey", str(d / "ca.key"), "-CAcreateserial",
                 "-out", str(d / f"{name}.crt"), "-days", "7", "-extfile", str(ext)]
            )  # fmt: skip
        run_tool(
            ["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
             "-out", str(d / "sa.key")]
        )  # fmt: skip
        run_tool(
            ["openssl", "pkey", "-in", str(d / "sa.key"), "-pubout", "-out", str(d / "sa.pub")]
        )
        return cls(
            d, d / "ca.crt", d / "ca.key", d / "server.crt", d / "server.key",
            d / "sa.key", d / "sa.pub",
        )  # fmt: skip
