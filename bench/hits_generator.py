"""A ``hits``-shaped table for ClickBench's queries: the benchmark's 105 columns and types, with
distributions that make its 43 queries do real work, deterministic from a seed, as Parquet.

ClickBench's own data (a month of Yandex.Metrica page views) cannot be downloaded here, so this
writes rows of the same shape. What matters to the queries, and so what the generator models:

- skew: a few counters (sites) and users own most hits (Zipf), ``CounterID = 62`` is the busiest
  counter (the dashboard queries 37-43 filter on it), ``UserID = 435090932899640449`` exists (Q20);
- high cardinality with many empty strings: URLs, titles, referers and search phrases come from
  large Zipf-ranked vocabularies; most hits have no search phrase, many no referer;
- a month of event times (July 2013, as ClickBench's), ``EventDate`` their day;
- flags (0/1 with a realistic rate), small enums (OS, engine ids, traffic source -1..10);
- hashes: ``URLHash``/``RefererHash`` are a per-string 63-bit hash, and the two constants Q41/Q42
  filter on are the hashes of the busiest URL/referer of counter 62, so those queries find rows.

Vectorized with numpy and pyarrow: strings are drawn as indices into a vocabulary and taken (only the
vocabularies, a fraction of the rows, are built in Python): a million rows take about 11 s to build and
27 s with the Parquet write at load average 12 on this 2-core machine (numpy's zipf(), replaced by an
inverse CDF, took most of the time before).

    .venv/bin/python bench/hits_generator.py --rows 1000000 --out /tmp/hits.parquet
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

# ClickBench's DDL (its portable create.sql): name and SQL type, in table order.
COLUMNS: list[tuple[str, str]] = [
    ("WatchID", "BIGINT"), ("JavaEnable", "SMALLINT"), ("Title", "TEXT"), ("GoodEvent", "SMALLINT"),
    ("EventTime", "TIMESTAMP"), ("EventDate", "DATE"), ("CounterID", "INTEGER"), ("ClientIP", "INTEGER"),
    ("RegionID", "INTEGER"), ("UserID", "BIGINT"), ("CounterClass", "SMALLINT"), ("OS", "SMALLINT"),
    ("UserAgent", "SMALLINT"), ("URL", "TEXT"), ("Referer", "TEXT"), ("IsRefresh", "SMALLINT"),
    ("RefererCategoryID", "SMALLINT"), ("RefererRegionID", "INTEGER"), ("URLCategoryID", "SMALLINT"),
    ("URLRegionID", "INTEGER"), ("ResolutionWidth", "SMALLINT"), ("ResolutionHeight", "SMALLINT"),
    ("ResolutionDepth", "SMALLINT"), ("FlashMajor", "SMALLINT"), ("FlashMinor", "SMALLINT"),
    ("FlashMinor2", "TEXT"), ("NetMajor", "SMALLINT"), ("NetMinor", "SMALLINT"), ("UserAgentMajor", "SMALLINT"),
    ("UserAgentMinor", "TEXT"), ("CookieEnable", "SMALLINT"), ("JavascriptEnable", "SMALLINT"),
    ("IsMobile", "SMALLINT"), ("MobilePhone", "SMALLINT"), ("MobilePhoneModel", "TEXT"), ("Params", "TEXT"),
    ("IPNetworkID", "INTEGER"), ("TraficSourceID", "SMALLINT"), ("SearchEngineID", "SMALLINT"),
    ("SearchPhrase", "TEXT"), ("AdvEngineID", "SMALLINT"), ("IsArtifical", "SMALLINT"),
    ("WindowClientWidth", "SMALLINT"), ("WindowClientHeight", "SMALLINT"), ("ClientTimeZone", "SMALLINT"),
    ("ClientEventTime", "TIMESTAMP"), ("SilverlightVersion1", "SMALLINT"), ("SilverlightVersion2", "SMALLINT"),
    ("SilverlightVersion3", "INTEGER"), ("SilverlightVersion4", "SMALLINT"), ("PageCharset", "TEXT"),
    ("CodeVersion", "INTEGER"), ("IsLink", "SMALLINT"), ("IsDownload", "SMALLINT"), ("IsNotBounce", "SMALLINT"),
    ("FUniqID", "BIGINT"), ("OriginalURL", "TEXT"), ("HID", "INTEGER"), ("IsOldCounter", "SMALLINT"),
    ("IsEvent", "SMALLINT"), ("IsParameter", "SMALLINT"), ("DontCountHits", "SMALLINT"), ("WithHash", "SMALLINT"),
    ("HitColor", "CHAR"), ("LocalEventTime", "TIMESTAMP"), ("Age", "SMALLINT"), ("Sex", "SMALLINT"),
    ("Income", "SMALLINT"), ("Interests", "SMALLINT"), ("Robotness", "SMALLINT"), ("RemoteIP", "INTEGER"),
    ("WindowName", "INTEGER"), ("OpenerName", "INTEGER"), ("HistoryLength", "SMALLINT"),
    ("BrowserLanguage", "TEXT"), ("BrowserCountry", "TEXT"), ("SocialNetwork", "TEXT"), ("SocialAction", "TEXT"),
    ("HTTPError", "SMALLINT"), ("SendTiming", "INTEGER"), ("DNSTiming", "INTEGER"), ("ConnectTiming", "INTEGER"),
    ("ResponseStartTiming", "INTEGER"), ("ResponseEndTiming", "INTEGER"), ("FetchTiming", "INTEGER"),
    ("SocialSourceNetworkID", "SMALLINT"), ("SocialSourcePage", "TEXT"), ("ParamPrice", "BIGINT"),
    ("ParamOrderID", "TEXT"), ("ParamCurrency", "TEXT"), ("ParamCurrencyID", "SMALLINT"),
    ("OpenstatServiceName", "TEXT"), ("OpenstatCampaignID", "TEXT"), ("OpenstatAdID", "TEXT"),
    ("OpenstatSourceID", "TEXT"), ("UTMSource", "TEXT"), ("UTMMedium", "TEXT"), ("UTMCampaign", "TEXT"),
    ("UTMContent", "TEXT"), ("UTMTerm", "TEXT"), ("FromTag", "TEXT"), ("HasGCLID", "SMALLINT"),
    ("RefererHash", "BIGINT"), ("URLHash", "BIGINT"), ("CLID", "INTEGER"),
]
ARROW_TYPES = {"BIGINT": pa.int64(), "INTEGER": pa.int32(), "SMALLINT": pa.int16(), "TEXT": pa.string(),
               "CHAR": pa.string(), "TIMESTAMP": pa.timestamp("s"), "DATE": pa.date32()}
SCHEMA = pa.schema([(name, ARROW_TYPES[kind]) for name, kind in COLUMNS])

MONTH_START = 1372636800  # 2013-07-01 00:00:00 UTC, ClickBench's month
MONTH_SECONDS = 31 * 86_400
BUSY_COUNTER = 62
KNOWN_USER = 435090932899640449
URL_HASH = 2868770270353813622  # Q42 filters on it
REFERER_HASH = 3594120000172545465  # Q41 filters on it

_WORDS = ("news", "weather", "video", "music", "games", "cars", "sport", "film", "recipes", "market",
          "shop", "maps", "mail", "translate", "tickets", "hotel", "phone", "book", "auto", "job", "dating",
          "forum", "photo", "kino", "online", "free", "download", "price", "moscow", "football", "serial")
_DOMAINS = ("google.com", "yandex.ru", "mail.ru", "vk.com", "example.org", "news.site", "avito.ru", "auto.ru",
            "kinopoisk.ru", "livejournal.com", "wikipedia.org", "odnoklassniki.ru", "rambler.ru", "youtube.com")


def _zipf_index(rng: np.random.Generator, n: int, size: int, a: float = 1.2) -> np.ndarray:
    """Indices in [0, size) with rank-frequency skew (weight 1/(rank+1)^a): index 0 is the most
    frequent. Inverse CDF over the finite ranks: numpy's zipf() rejection-samples, ten times slower."""
    cdf = np.cumsum(1.0 / np.arange(1, size + 1, dtype=np.float64) ** a)
    return np.minimum(np.searchsorted(cdf, rng.random(n) * cdf[-1], side="right"), size - 1).astype(np.int64)


def _vocabulary(rng: np.random.Generator, size: int, make) -> pa.Array:
    words = np.array(_WORDS)
    a, b, c = (words[rng.integers(0, len(words), size)] for _ in range(3))
    return pa.array([make(i, a[i], b[i], c[i]) for i in range(size)], pa.string())


def _hash63(values: pa.Array) -> np.ndarray:
    """A per-string 63-bit hash; over the vocabulary, not the rows, so hashing per string is cheap."""
    return np.array([int.from_bytes(hashlib.blake2b(v.encode(), digest_size=8).digest(), "little") >> 1
                     for v in values.to_pylist()], np.int64)


def _flag(rng: np.random.Generator, n: int, rate: float) -> np.ndarray:
    return (rng.random(n) < rate).astype(np.int16)


def _enum(rng: np.random.Generator, n: int, values, weights=None) -> np.ndarray:
    values = np.asarray(values)
    p = None if weights is None else np.asarray(weights, float) / np.sum(weights)
    return values[rng.choice(len(values), n, p=p)]


def _with_empty(rng: np.random.Generator, idx: np.ndarray, empty_rate: float) -> np.ndarray:
    """Indices with ``empty_rate`` of them -1 (an empty string)."""
    return np.where(rng.random(len(idx)) < empty_rate, -1, idx)


def _take(vocab: pa.Array, idx: np.ndarray) -> pa.Array:
    """vocab[idx], '' where idx is -1."""
    got = vocab.take(pa.array(np.maximum(idx, 0)))
    return pc.if_else(pa.array(idx < 0), pa.scalar("", pa.string()), got)


def _pinned_hashes(vocabulary, index: np.ndarray, counter: np.ndarray, pinned: int) -> np.ndarray:
    """Each row's 63-bit hash of its vocabulary entry (0 where empty), with the entry the busy
    counter hits most hashing to ``pinned``: the value a ClickBench query filters on."""
    hashes = _hash63(vocabulary)
    busy = int(np.bincount(index[(index >= 0) & (counter == BUSY_COUNTER)], minlength=1).argmax())
    hashes[busy] = pinned
    return np.where(index < 0, 0, hashes[np.maximum(index, 0)])


def generate(rows: int, seed: int = 0) -> pa.Table:
    """``rows`` hits, the same for the same ``seed``."""
    rng = np.random.default_rng(seed)
    n = rows
    scale = max(1, n // 1000)
    cols: dict[str, np.ndarray | pa.Array] = {}

    # Counters (sites): 62 the busiest (~12%), the rest Zipf over a few thousand ids.
    counters = np.unique(rng.integers(1, 200_000, 5_000))
    counters = counters[counters != BUSY_COUNTER]
    counter = counters[_zipf_index(rng, n, len(counters), 1.3)]
    counter[rng.random(n) < 0.12] = BUSY_COUNTER
    cols["CounterID"] = counter.astype(np.int32)

    # Users: heavy hitters and a long tail; the id ClickBench's Q20 looks up is one of them.
    n_users = max(1000, n // 8)
    user_ids = rng.integers(1, 2**63 - 1, n_users, dtype=np.int64)
    user_ids[17] = KNOWN_USER
    user_rank = _zipf_index(rng, n, n_users, 1.15)
    cols["UserID"] = user_ids[user_rank]
    ip_of_user = rng.integers(-2**31, 2**31 - 1, n_users, dtype=np.int64)
    cols["ClientIP"] = np.where(rng.random(n) < 0.9, ip_of_user[user_rank],
                                rng.integers(-2**31, 2**31 - 1, n)).astype(np.int32)
    cols["RemoteIP"] = (cols["ClientIP"].astype(np.int64) ^ rng.integers(0, 256, n)).astype(np.int32)
    cols["IPNetworkID"] = (np.abs(cols["ClientIP"].astype(np.int64)) >> 12).astype(np.int32) % 100_000
    region_of_user = _zipf_index(rng, n_users, 3_000, 1.3) + 1
    cols["RegionID"] = region_of_user[user_rank].astype(np.int32)

    # A month of event times; busier in the day (UTC+4 ish), dates follow the times.
    day = rng.integers(0, 31, n)
    hour = np.clip(np.round(rng.normal(14, 4.5, n)), 0, 23).astype(np.int64)
    seconds = MONTH_START + day * 86_400 + hour * 3_600 + rng.integers(0, 3_600, n)
    cols["EventTime"] = seconds
    cols["EventDate"] = (seconds // 86_400).astype(np.int32)
    cols["ClientEventTime"] = seconds + rng.integers(-120, 120, n)
    cols["LocalEventTime"] = seconds + 4 * 3_600 + rng.integers(-5, 5, n)
    cols["ClientTimeZone"] = _enum(rng, n, [-1, 0, 120, 180, 240, 300, 360], [5, 1, 10, 40, 20, 5, 3]).astype(np.int16)

    # URLs and titles: a big vocabulary per page, Zipf-ranked; many hits on a few pages.
    n_pages = max(2_000, scale * 120)
    domains = np.array(_DOMAINS)
    page_domain = domains[_zipf_index(rng, n_pages, len(domains), 1.4)]
    urls = _vocabulary(rng, n_pages, lambda i, a, b, c: f"http://{page_domain[i]}/{a}/{b}-{i}.html?id={i % 977}")
    titles = _vocabulary(rng, n_pages, lambda i, a, b, c: f"{a.capitalize()} {b} {c} - "
                                                          f"{'Google ' if i % 13 == 0 else ''}"
                                                          f"page {i}")
    page = _zipf_index(rng, n, n_pages, 1.1)
    page = _with_empty(rng, page, 0.02)
    cols["URL"] = _take(urls, page)
    cols["Title"] = _take(titles, np.where(rng.random(n) < 0.1, -1, page))
    cols["OriginalURL"] = _take(urls, np.where(rng.random(n) < 0.8, -1, page))
    cols["URLHash"] = _pinned_hashes(urls, page, counter, URL_HASH)
    cols["URLCategoryID"] = _enum(rng, n, np.arange(0, 40), np.r_[50, np.ones(39)]).astype(np.int16)
    cols["URLRegionID"] = _enum(rng, n, np.arange(0, 300), np.r_[100, np.ones(299)]).astype(np.int32)

    # Referers: about 40% empty, a Zipf over other pages and search result pages.
    n_refs = max(1_000, scale * 60)
    ref_domain = _zipf_index(rng, n_refs, len(_DOMAINS), 1.5)
    referers = _vocabulary(rng, n_refs, lambda i, a, b, c:
                           f"https://{'www.' if i % 3 else ''}{_DOMAINS[ref_domain[i]]}"
                           f"/{a}/{b}?q={c}&p={i}")
    ref = _with_empty(rng, _zipf_index(rng, n, n_refs, 1.15), 0.4)
    cols["Referer"] = _take(referers, ref)
    cols["RefererHash"] = _pinned_hashes(referers, ref, counter, REFERER_HASH)
    cols["RefererCategoryID"] = _enum(rng, n, np.arange(0, 20), np.r_[60, np.ones(19)]).astype(np.int16)
    cols["RefererRegionID"] = _enum(rng, n, np.arange(0, 200), np.r_[80, np.ones(199)]).astype(np.int32)

    # Search: ~80% of hits have no phrase; the rest skewed over a large vocabulary.
    n_phrases = max(1_000, scale * 40)
    phrases = _vocabulary(rng, n_phrases, lambda i, a, b, c: f"{a} {b}" if i % 4 else f"{a} {b} {c} {i}")
    phrase = _with_empty(rng, _zipf_index(rng, n, n_phrases, 1.2), 0.8)
    cols["SearchPhrase"] = _take(phrases, phrase)
    engine = _enum(rng, n, [2, 3, 1, 8, 14], [60, 20, 10, 5, 5])
    cols["SearchEngineID"] = np.where(phrase < 0, 0, engine).astype(np.int16)
    cols["AdvEngineID"] = np.where(rng.random(n) < 0.97, 0, _enum(rng, n, [2, 3, 12, 27, 13])).astype(np.int16)
    cols["TraficSourceID"] = _enum(rng, n, [-1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 10],
                                   [10, 30, 10, 25, 10, 3, 2, 6, 1, 1, 2]).astype(np.int16)

    # Clients: screens, browsers, OS, mobile.
    res = _enum(rng, n, [(1920, 1080), (1366, 768), (1280, 1024), (1024, 768), (1440, 900), (0, 0), (360, 640)],
                [30, 25, 10, 10, 10, 5, 10])
    cols["ResolutionWidth"] = res[:, 0].astype(np.int16)
    cols["ResolutionHeight"] = res[:, 1].astype(np.int16)
    cols["ResolutionDepth"] = _enum(rng, n, [24, 32, 16, 0], [60, 30, 5, 5]).astype(np.int16)
    cols["WindowClientWidth"] = np.maximum(0, cols["ResolutionWidth"] - rng.integers(0, 40, n) * 10).astype(np.int16)
    cols["WindowClientHeight"] = np.maximum(0, cols["ResolutionHeight"] - rng.integers(0, 40, n) * 10).astype(np.int16)
    cols["OS"] = _enum(rng, n, np.arange(0, 50), 1.0 / np.arange(1, 51) ** 1.5).astype(np.int16)
    cols["UserAgent"] = _enum(rng, n, np.arange(0, 30), 1.0 / np.arange(1, 31) ** 1.5).astype(np.int16)
    cols["UserAgentMajor"] = rng.integers(0, 40, n).astype(np.int16)
    cols["UserAgentMinor"] = _take(pa.array([f"{i}" for i in range(20)] + ["1a", "b2", "Ar"]),
                                   _with_empty(rng, rng.integers(0, 23, n), 0.3))
    mobile = _flag(rng, n, 0.12)
    cols["IsMobile"] = mobile
    models = pa.array(["iPad", "iPhone", "GT-I9300", "Galaxy S3", "HTC One", "Lumia 920", "Nexus 4", "Xperia Z",
                       "Redmi", "MI 2", "A800", "N8000"])
    cols["MobilePhoneModel"] = _take(models, np.where(mobile == 1, _zipf_index(rng, n, len(models), 1.5), -1))
    cols["MobilePhone"] = np.where(mobile == 1, rng.integers(1, 60, n), 0).astype(np.int16)
    cols["BrowserLanguage"] = _take(pa.array(["ru", "en", "uk", "de", "tr", "kk", "be"]),
                                    _with_empty(rng, _zipf_index(rng, n, 7, 1.5), 0.05))
    cols["BrowserCountry"] = _take(pa.array(["RU", "UA", "BY", "KZ", "US", "DE", "TR", "GB"]),
                                   _with_empty(rng, _zipf_index(rng, n, 8, 1.5), 0.05))
    cols["PageCharset"] = _take(pa.array(["utf-8", "windows-1251", "koi8-r"]),
                                _with_empty(rng, _zipf_index(rng, n, 3, 2.0), 0.5))
    cols["FlashMinor2"] = _take(pa.array(["0", "1", "2", "D"]), _with_empty(rng, rng.integers(0, 4, n), 0.7))
    cols["HitColor"] = _take(pa.array(["D", "E", "F", "A"]), _enum(rng, n, [0, 1, 2, 3], [70, 20, 8, 2]))
    cols["Params"] = _take(pa.array([f"param{i}=v{i % 7}" for i in range(500)]),
                           _with_empty(rng, _zipf_index(rng, n, 500), 0.9))

    # Flags: rates of a real page-view log.
    for name, rate in (("JavaEnable", 0.7), ("GoodEvent", 0.999), ("IsRefresh", 0.08), ("CookieEnable", 0.98),
                       ("JavascriptEnable", 0.97), ("IsArtifical", 0.01), ("IsLink", 0.04), ("IsDownload", 0.01),
                       ("IsNotBounce", 0.3), ("IsOldCounter", 0.05), ("IsEvent", 0.05), ("IsParameter", 0.05),
                       ("DontCountHits", 0.03), ("WithHash", 0.02), ("HasGCLID", 0.01)):
        cols[name] = _flag(rng, n, rate)

    # Small enums and counters.
    cols["CounterClass"] = _enum(rng, n, [0, 1, 2], [90, 8, 2]).astype(np.int16)
    cols["FlashMajor"] = _enum(rng, n, [0, 11, 10, 9], [40, 40, 15, 5]).astype(np.int16)
    cols["FlashMinor"] = _enum(rng, n, [0, 1, 2, 5, 7], [40, 20, 20, 10, 10]).astype(np.int16)
    cols["NetMajor"] = _enum(rng, n, [0, 3, 4], [80, 10, 10]).astype(np.int16)
    cols["NetMinor"] = _enum(rng, n, [0, 5, 8], [80, 10, 10]).astype(np.int16)
    cols["SilverlightVersion1"] = _enum(rng, n, [0, 4, 5], [60, 20, 20]).astype(np.int16)
    cols["SilverlightVersion2"] = _enum(rng, n, [0, 1], [70, 30]).astype(np.int16)
    cols["SilverlightVersion3"] = _enum(rng, n, [0, 20125, 40624, 51204], [60, 20, 10, 10]).astype(np.int32)
    cols["SilverlightVersion4"] = _enum(rng, n, [0, 1, 2], [70, 20, 10]).astype(np.int16)
    cols["CodeVersion"] = _enum(rng, n, [0, 183, 188, 259, 447], [5, 20, 30, 30, 15]).astype(np.int32)
    cols["HID"] = rng.integers(0, 2**31 - 1, n).astype(np.int32)
    cols["FUniqID"] = np.where(rng.random(n) < 0.3, 0, rng.integers(1, 2**62, n))
    cols["WatchID"] = rng.integers(1, 2**63 - 1, n, dtype=np.int64)
    cols["Age"] = _enum(rng, n, [0, 16, 20, 25, 35, 45, 55], [40, 5, 15, 20, 10, 6, 4]).astype(np.int16)
    cols["Sex"] = _enum(rng, n, [0, 1, 2], [40, 30, 30]).astype(np.int16)
    cols["Income"] = _enum(rng, n, [0, 1, 2, 3, 4], [40, 20, 20, 15, 5]).astype(np.int16)
    cols["Interests"] = _zipf_index(rng, n, 4_000, 1.3).astype(np.int16)
    cols["Robotness"] = _enum(rng, n, [0, 1, 2], [95, 3, 2]).astype(np.int16)
    cols["WindowName"] = np.where(rng.random(n) < 0.5, 0, rng.integers(-2**31, 2**31 - 1, n)).astype(np.int32)
    cols["OpenerName"] = np.where(rng.random(n) < 0.8, 0, rng.integers(-2**31, 2**31 - 1, n)).astype(np.int32)
    cols["HistoryLength"] = np.minimum(rng.geometric(0.3, n), 50).astype(np.int16)
    cols["HTTPError"] = np.where(rng.random(n) < 0.99, 0, _enum(rng, n, [404, 500, 403])).astype(np.int16)
    timed = rng.random(n) < 0.6
    for name, mean in (("SendTiming", 40), ("DNSTiming", 20), ("ConnectTiming", 60), ("ResponseStartTiming", 200),
                       ("ResponseEndTiming", 300), ("FetchTiming", 500)):
        cols[name] = np.where(timed, rng.exponential(mean, n).astype(np.int64), 0).astype(np.int32)
    social = rng.random(n) < 0.03
    cols["SocialNetwork"] = _take(pa.array(["vk", "facebook", "twitter", "odnoklassniki"]),
                                  np.where(social, rng.integers(0, 4, n), -1))
    cols["SocialAction"] = _take(pa.array(["like", "share", "comment"]), np.where(social, rng.integers(0, 3, n), -1))
    cols["SocialSourceNetworkID"] = np.where(social, rng.integers(1, 10, n), 0).astype(np.int16)
    cols["SocialSourcePage"] = _take(pa.array([f"/club{i}" for i in range(300)]),
                                     np.where(social, _zipf_index(rng, n, 300), -1))
    ordered = rng.random(n) < 0.01
    cols["ParamPrice"] = np.where(ordered, rng.integers(100, 100_000, n), 0)
    cols["ParamOrderID"] = _take(pa.array([f"order-{i}" for i in range(max(1, n // 100))]),
                                 np.where(ordered, rng.integers(0, max(1, n // 100), n), -1))
    cols["ParamCurrency"] = _take(pa.array(["RUB", "USD", "EUR"]), np.where(ordered, rng.integers(0, 3, n), -1))
    cols["ParamCurrencyID"] = np.where(ordered, rng.integers(1, 4, n), 0).astype(np.int16)
    campaign = rng.random(n) < 0.05
    for name, values in (("OpenstatServiceName", ["direct", "market", "begun"]),
                         ("OpenstatCampaignID", [f"c{i}" for i in range(50)]),
                         ("OpenstatAdID", [f"ad{i}" for i in range(200)]),
                         ("OpenstatSourceID", [f"s{i}" for i in range(30)]),
                         ("UTMSource", ["yandex", "google", "vk", "email"]),
                         ("UTMMedium", ["cpc", "banner", "email"]),
                         ("UTMCampaign", [f"camp{i}" for i in range(40)]),
                         ("UTMContent", [f"text{i}" for i in range(60)]),
                         ("UTMTerm", [f"term {w}" for w in _WORDS]),
                         ("FromTag", [f"from{i}" for i in range(20)])):
        cols[name] = _take(pa.array(values), np.where(campaign, _zipf_index(rng, n, len(values)), -1))
    cols["CLID"] = np.where(rng.random(n) < 0.95, 0, rng.integers(1, 5_000, n)).astype(np.int32)

    arrays = []
    for field in SCHEMA:
        value = cols[field.name]
        if isinstance(value, np.ndarray):
            if pa.types.is_date32(field.type):
                value = pa.array(value.astype(np.int32)).cast(pa.date32())
            elif pa.types.is_timestamp(field.type):
                value = pa.array(value.astype(np.int64)).cast(field.type)
            else:
                value = pa.array(value.astype(field.type.to_pandas_dtype()))
        arrays.append(value.cast(field.type) if value.type != field.type else value)
    return pa.Table.from_arrays(arrays, schema=SCHEMA)


def write(rows: int, path: str, seed: int = 0) -> str:
    pq.write_table(generate(rows, seed), path, row_group_size=256 * 1024)
    return path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="hits.parquet")
    args = ap.parse_args()
    started = time.perf_counter()
    write(args.rows, args.out, args.seed)
    print(f"{args.rows:,} rows -> {args.out} ({os.path.getsize(args.out) / 1e6:.0f} MB) "
          f"in {time.perf_counter() - started:.1f}s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
