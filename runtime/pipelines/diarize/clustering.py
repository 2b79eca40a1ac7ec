"""Speaker clustering of embeddings: agglomerative (cosine, a distance threshold) and spectral
(an eigengap estimate of the speaker count), both held to a speaker-count range.

Shapes: N embeddings of size E, L2-normalised rows. Labels are ints 0..K-1 numbered in order of
first appearance, so the first embedding's speaker is 0. Everything is deterministic (k-means
runs from a fixed seed).
"""

from __future__ import annotations

import numpy as np

MIN_NEIGHBOURS = 8  # affinity entries each row keeps at least (itself included)


def _relabel(labels: np.ndarray) -> np.ndarray:
    """Labels renumbered 0..K-1 in order of first appearance."""
    order = {}
    for label in labels.tolist():
        order.setdefault(label, len(order))
    return np.asarray([order[label] for label in labels.tolist()], dtype=np.int64)


def _bounds(n: int, num: int | None, low: int, high: int | None) -> tuple[int, int]:
    """The speaker-count range a clustering of ``n`` embeddings may return."""
    if num is not None:
        k = min(num, n)
        return k, k
    high = n if high is None else min(high, n)
    return min(low, high), high


def agglomerative(
    embeddings: np.ndarray, threshold: float, *, num: int | None = None, low: int = 1, high: int | None = None
) -> np.ndarray:
    """Average-linkage clustering on cosine distance: merges stop at ``threshold`` (0..2).

    embeddings [N, E] -> labels [N]. When the threshold gives fewer than ``low`` or more than
    ``high`` clusters (or ``num`` is given), the dendrogram is cut at that count instead.
    """
    from scipy.cluster.hierarchy import fcluster, linkage

    n = len(embeddings)
    if n < 2:
        return np.zeros(n, dtype=np.int64)
    lo, hi = _bounds(n, num, low, high)
    tree = linkage(embeddings, method="average", metric="cosine")
    labels = fcluster(tree, t=threshold, criterion="distance")
    k = len(np.unique(labels))
    if not lo <= k <= hi:
        labels = fcluster(tree, t=min(max(k, lo), hi), criterion="maxclust")
    return _relabel(labels)


def affinity(embeddings: np.ndarray, prune: float, min_neighbours: int = MIN_NEIGHBOURS) -> np.ndarray:
    """Cosine similarity mapped to [0, 1], each row keeping only its ``1 - prune`` strongest
    entries (the row-wise thresholding that makes the eigengap meaningful), and never fewer than
    ``min_neighbours`` (on a short file a window with few strong links would otherwise be cut
    off as a speaker of its own), symmetrised.

    embeddings [N, E] -> affinity [N, N].
    """
    a = (embeddings @ embeddings.T + 1.0) / 2.0
    n = len(a)
    keep = min(n, max(min_neighbours, int(round(n * (1.0 - prune)))))
    cut = -np.sort(-a, axis=1)[:, keep - 1 : keep]  # each row's keep-th largest value
    a = np.where(a >= cut, a, 0.0)
    return (a + a.T) / 2.0


def spectral_embedding(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Eigenvalues (ascending) and eigenvectors [N, N] of the normalised Laplacian of ``a``."""
    degree = a.sum(axis=1)
    scale = 1.0 / np.sqrt(np.maximum(degree, 1e-10))
    laplacian = np.eye(len(a)) - scale[:, None] * a * scale[None, :]
    return np.linalg.eigh(laplacian)


def estimate_count(eigenvalues: np.ndarray, low: int, high: int, min_ratio: float = 1.0) -> int:
    """The speaker count at the largest gap between consecutive Laplacian eigenvalues, among the
    counts k whose gap is at least ``min_ratio`` times the k-th eigenvalue (k clusters should
    leave k eigenvalues near zero): a few noisy windows of one voice give gaps, but after
    eigenvalues far from zero. Without such a count above 1, one speaker (or ``low``)."""
    if high <= low:
        return low
    values = np.maximum(eigenvalues[: high + 1], 0.0)
    gaps = np.diff(values)  # gaps[k-1] follows the k-th smallest eigenvalue
    ks = np.arange(low, high + 1)
    clear = [k for k in ks if k == 1 or gaps[k - 1] >= min_ratio * values[k - 1]]
    candidates = clear or list(ks)
    return int(max(candidates, key=lambda k: gaps[k - 1]))


def _kmeans(x: np.ndarray, k: int, seed: int = 0, restarts: int = 10) -> np.ndarray:
    """k-means++ from a fixed seed, the lowest-inertia run of ``restarts``: x [N, D] -> [N]."""
    from scipy.cluster.vq import kmeans2

    rng = np.random.default_rng(seed)
    best, best_inertia = None, np.inf
    for _ in range(restarts):
        centroids, labels = kmeans2(x, k, minit="++", seed=rng)
        inertia = float(((x - centroids[labels]) ** 2).sum())
        if inertia < best_inertia:
            best, best_inertia = labels, inertia
    return best


def spectral(
    embeddings: np.ndarray, *, prune: float, num: int | None = None, low: int = 1, high: int | None = 8
) -> np.ndarray:
    """Spectral clustering: the speaker count from the eigengap (or ``num``), k-means on the
    row-normalised first K eigenvectors. embeddings [N, E] -> labels [N]."""
    n = len(embeddings)
    if n < 2:
        return np.zeros(n, dtype=np.int64)
    lo, hi = _bounds(n, num, low, high)
    values, vectors = spectral_embedding(affinity(embeddings, prune))
    k = estimate_count(values, lo, min(hi, n - 1) if hi > 1 else hi)
    if k == 1:
        return np.zeros(n, dtype=np.int64)
    x = vectors[:, :k]
    x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-10)
    return _relabel(_kmeans(x, k))


def dissolve_small(labels: np.ndarray, min_size: int, keep: int = 1) -> np.ndarray:
    """Clusters of fewer than ``min_size`` members are dissolved (their members get label -1),
    smallest first, while more than ``keep`` clusters remain: a "speaker" heard in one or two
    windows is far more often a noisy embedding than a person. labels [N] -> labels [N]."""
    labels = labels.copy()
    sizes = np.bincount(labels)
    order = [int(c) for c in np.argsort(sizes, kind="stable")]
    alive = len(sizes)
    for c in order:
        if sizes[c] >= min_size or alive <= keep:
            break
        labels[labels == c] = -1
        alive -= 1
    return labels


def refine(embeddings: np.ndarray, labels: np.ndarray, rounds: int = 5) -> np.ndarray:
    """Each embedding moved to the cluster whose mean direction it is closest to, repeated until
    stable (spherical k-means from the clustering): fixes windows the tree or graph misplaced and
    places the unlabelled ones (-1). A round that would empty a cluster is not taken.
    embeddings [N, E], labels [N] -> labels [N] numbered 0..K-1 in order of first appearance."""
    alive = sorted({int(c) for c in labels if c >= 0})
    if len(alive) < 2:
        return np.zeros(len(labels), dtype=np.int64)
    index = {c: i for i, c in enumerate(alive)}
    labels = np.asarray([index.get(int(c), -1) for c in labels], dtype=np.int64)
    k = len(alive)
    for round_ in range(rounds):
        centroids = np.stack([embeddings[labels == c].mean(axis=0) for c in range(k)])
        centroids /= np.maximum(np.linalg.norm(centroids, axis=1, keepdims=True), 1e-10)
        nearest = np.argmax(embeddings @ centroids.T, axis=1)
        if round_ == 0:  # the unlabelled ones are always placed
            labels = np.where(labels < 0, nearest, labels)
        if np.array_equal(nearest, labels) or len(np.unique(nearest)) < k:
            break
        labels = nearest
    return _relabel(labels)
