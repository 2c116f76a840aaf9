"""The one HTTP request path to the Kubernetes API server and its one error hierarchy.

`request` sends raw JSON through the official client's `ApiClient` (host, auth, connection pool);
`errors` maps every failure onto `KubeApiError`. The Kubernetes client (`controller.kube`), the
informers' list/watch (`controller.cache`) and the Lease lock (`controller.runtime`) all use it,
so a status code means the same thing to each of them.
"""
