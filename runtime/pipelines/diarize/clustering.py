"""Speaker clustering of embeddings: agglomerative (cosine, a distance threshold, held to a
speaker-count range), and the clustering of local speakers across windows that never puts two
speakers of one window together.

Shapes: M embeddings of size E, L2-normalised rows. Labels are ints 0..K-1 numbered in order of
first appearance, so the first embedding's speaker is 0. Everything is deterministic.
"""

from __future__ import annotations

import numpy as np

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


LINKAGES = ("average", "centroid")  # centroid is pyannote 3.1's; benchmarks/diarize_tune.py compares them


def agglomerative(
    embeddings: np.ndarray, threshold: float, *, linkage: str = "average", num: int | None = None, low: int = 1, high: int | None = None
) -> np.ndarray:
    """Agglomerative clustering (``linkage``: one of ``LINKAGES``) on cosine distance: merges stop
    at ``threshold`` (0..2). Centroid linkage runs on the unit vectors' Euclidean distance, where a
    cosine distance d is sqrt(2 d).

    embeddings [N, E] -> labels [N]. When the threshold gives fewer than ``low`` or more than
    ``high`` clusters (or ``num`` is given), the dendrogram is cut at that count instead.
    """
    from scipy.cluster.hierarchy import fcluster, linkage as dendrogram

    if linkage not in LINKAGES:
        raise ValueError(f"linkage must be one of {', '.join(LINKAGES)}, not {linkage!r}")
    n = len(embeddings)
    if n < 2:
        return np.zeros(n, dtype=np.int64)
    lo, hi = _bounds(n, num, low, high)
    if linkage == "centroid":
        # fastcluster's vector form builds scipy's tree in O(N E) memory: scipy holds the N^2 / 2
        # distances twice (553 MB for the 8600 local speakers of a three-hour recording).
        from fastcluster import linkage_vector

        tree = linkage_vector(_normalised(embeddings).astype(np.float64), method="centroid", metric="euclidean")
        labels = fcluster(tree, t=float(np.sqrt(2 * threshold)), criterion="distance")
    else:
        tree = dendrogram(embeddings, method=linkage, metric="cosine")
        labels = fcluster(tree, t=threshold, criterion="distance")
    k = len(np.unique(labels))
    if not lo <= k <= hi:
        labels = fcluster(tree, t=min(max(k, lo), hi), criterion="maxclust")
    return _relabel(labels)


def _normalised(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-10)


def fold_small(embeddings: np.ndarray, labels: np.ndarray, min_size: int, keep: int = 1) -> np.ndarray:
    """Clusters of fewer than ``min_size`` members joined to the nearest (by centroid) of the
    large ones; nothing folds when fewer than ``keep`` (at least one) clusters are large.
    embeddings [M, E], labels [M] -> labels [M] numbered 0..K-1 in order of first appearance."""
    sizes = np.bincount(labels)
    large = np.flatnonzero(sizes >= min_size)
    if len(large) < max(keep, 1) or len(large) == len(sizes):
        return _relabel(labels)
    small = [int(c) for c in range(len(sizes)) if sizes[c] < min_size]
    keepers = np.setdiff1d(np.arange(len(sizes)), small)
    centroids = _normalised(np.stack([embeddings[labels == c].mean(axis=0) for c in keepers]))
    labels = labels.copy()
    for c in small:
        members = labels == c
        nearest = keepers[np.argmax(_normalised(embeddings[members].mean(axis=0)) @ centroids.T)]
        labels[members] = nearest
    return _relabel(labels)


def cluster_local_speakers(
    embeddings: np.ndarray,
    reliable: np.ndarray,
    active: np.ndarray,
    *,
    threshold: float,
    min_cluster_size: int,
    linkage: str = "average",
    num: int | None = None,
    low: int = 1,
    high: int | None = None,
) -> np.ndarray:
    """Global speaker labels of local speakers, two speakers of one window never merged.

    embeddings [N, K, E], reliable and active [N, K] -> labels [N, K] (-1: inactive or left over).
    The reliable embeddings are clustered (``linkage`` on cosine distance, stopped at
    ``threshold`` or cut at the count asked for; clusters smaller than ``min_cluster_size`` folded
    into the nearest larger one unless a count was asked for); then every active local speaker
    is assigned to a cluster centroid, one window at a time, by an optimal one-to-one matching on
    cosine similarity (Hungarian), so two local speakers of a window get two speakers.
    """
    from scipy.optimize import linear_sum_assignment

    n, k, _ = embeddings.shape
    labels = np.full((n, k), -1, dtype=np.int64)
    train = np.argwhere(reliable & active)
    if len(train) == 0:
        train = np.argwhere(active & ~np.isnan(embeddings[..., 0]))
    if len(train) == 0:
        return labels
    x = _normalised(embeddings[train[:, 0], train[:, 1]])
    found = agglomerative(x, threshold, linkage=linkage, num=num, low=low, high=high)
    if num is None:
        found = fold_small(x, found, min_cluster_size, keep=low)
    centroids = _normalised(np.stack([x[found == c].mean(axis=0) for c in range(found.max() + 1)]))
    for w in range(n):
        rows = np.flatnonzero(active[w] & ~np.isnan(embeddings[w, :, 0]))
        if not len(rows):
            continue
        similarity = _normalised(embeddings[w, rows]) @ centroids.T
        r, c = linear_sum_assignment(similarity, maximize=True)
        labels[w, rows[r]] = c
    return labels
