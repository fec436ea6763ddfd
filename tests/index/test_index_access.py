"""Index access against a real HTTP server on 127.0.0.1: pages, metadata by PEP 658, by range and by
download, the cache, retries, timeouts and what broken servers and files do. Each test asserts the
behaviour and what it cost (requests made, bytes the server sent)."""

from __future__ import annotations

import hashlib
import io
import os
import tarfile
import time
import zipfile
import zlib
from dataclasses import replace

import pytest
from index_server import make_wheel

from cudaresolve.index.cache import IndexCache, OfflineMiss
from cudaresolve.index.http import Cap, Http, IndexAccessError, LimitExceeded
from cudaresolve.index.limits import Limits
from cudaresolve.index.metadata import MetadataUnavailable, core_metadata, wheel_members
from cudaresolve.index.pages import find_links_files, index_files

PAYLOAD = os.urandom(2_000_000)  # incompressible: the wheel is as big as this


@pytest.fixture
def cache(tmp_path):
    return IndexCache(str(tmp_path / "index"))


def http(**options) -> Http:
    options.setdefault("sleep", lambda seconds: None)
    return Http(**options)


def demo_wheel(version="1.0", **options):
    return make_wheel(
        "demo",
        version,
        requires=["numpy>=1.20", "cupy-cuda12x; extra == 'gpu'"],
        extras=["gpu"],
        requires_python=">=3.9",
        files={"demo/payload.bin": PAYLOAD},
        **options,
    )


def test_json_and_html_pages_say_the_same(server, cache):
    filename, data = demo_wheel()
    server.add(filename, data, requires_python=">=3.9", yanked="broken build")
    server.add(*make_wheel("demo", "2.0"), metadata=False)
    server.add(*make_wheel("other", "1.0"))
    from_json = index_files(http(), cache, server.url + "/simple", "Demo")
    server.pages = "html"
    from_html = index_files(http(), IndexCache(cache.directory + "-html"), server.url + "/simple/", "demo")
    # HTML pages carry no sizes; everything else must agree
    assert [replace(f, size=None, source="") for f in from_json] == [replace(f, source="") for f in from_html]
    first, second = from_json
    assert first.filename == filename and str(first.version) == "1.0"
    assert first.url == f"{server.url}/files/{filename}"
    assert first.sha256 == hashlib.sha256(data).hexdigest()
    assert first.requires_python == ">=3.9"
    assert first.yanked == "broken build" and second.yanked is None
    assert first.metadata_hashes and second.metadata_hashes is None


def test_content_negotiation_prefers_json(server, cache):
    server.pages = "both"
    server.add(*make_wheel("demo", "1.0"))
    index_files(http(), cache, server.url + "/simple", "demo")
    assert "application/vnd.pypi.simple.v1+json" in server.requests[0][1]["Accept"].split(",")[0]


def test_unknown_project_is_no_files(server, cache):
    assert index_files(http(), cache, server.url + "/simple", "nothing-here") == ()


def test_metadata_from_pep658_costs_one_small_request(server, cache):
    filename, data = demo_wheel()
    server.add(filename, data)
    (file,) = index_files(http(), cache, server.url + "/simple", "demo")
    before = server.bytes_sent
    metadata = core_metadata(http(), cache, file)
    assert metadata.how == "pep658"
    assert metadata.requires_dist == ("numpy>=1.20", "cupy-cuda12x; extra == 'gpu'")
    assert metadata.provides_extra == ("gpu",) and metadata.requires_python == ">=3.9"
    assert server.paths()[-1] == f"/files/{filename}.metadata"
    assert server.bytes_sent - before < 500


@pytest.mark.parametrize("dist_info_first", [False, True])
def test_metadata_by_range_reads_a_small_part_of_the_wheel(server, cache, dist_info_first):
    filename, data = demo_wheel(dist_info_first=dist_info_first)
    server.add(filename, data, metadata=False)
    (file,) = index_files(http(), cache, server.url + "/simple", "demo")
    before, requests_before = server.bytes_sent, len(server.requests)
    metadata = core_metadata(http(), cache, file)
    assert metadata.how == "range" and metadata.requires_dist[0] == "numpy>=1.20"
    # the tail holds the central directory, and METADATA too when it is stored last (as wheels do);
    # stored first, it costs exactly one more request
    assert len(server.requests) - requests_before == (2 if dist_info_first else 1)
    assert all("Range" in headers for _, headers in server.requests[requests_before:])
    assert server.bytes_sent - before < 0.05 * len(data)


def test_metadata_is_cached_by_hash(server, cache):
    filename, data = demo_wheel()
    server.add(filename, data, metadata=False)
    (file,) = index_files(http(), cache, server.url + "/simple", "demo")
    core_metadata(http(), cache, file)
    requests_before = len(server.requests)
    again = core_metadata(http(), cache, file)
    assert again.how == "cache" and len(server.requests) == requests_before
    offline = core_metadata(http(), IndexCache(cache.directory, offline=True), file)
    assert offline.requires_dist == again.requires_dist and len(server.requests) == requests_before


def test_wheel_members_from_the_zip_directory_by_one_range_read_then_the_cache(server, cache):
    """A wheel's member names (whether torch's aarch64 wheel holds libtorch_cuda.so) cost one range
    read of its tail, then come from the cache by sha256; a damaged entry is read again."""
    filename, data = demo_wheel()
    server.add(filename, data, metadata=False)
    (file,) = index_files(http(), cache, server.url + "/simple", "demo")
    before, requests_before = server.bytes_sent, len(server.requests)
    names = wheel_members(http(), cache, file)
    assert "demo/payload.bin" in names and "demo-1.0.dist-info/METADATA" in names
    assert len(server.requests) - requests_before == 1 and server.bytes_sent - before < 0.05 * len(data)
    requests_before = len(server.requests)
    assert wheel_members(http(), IndexCache(cache.directory, offline=True), file) == names
    assert len(server.requests) == requests_before
    cache.store_blob("members", file.sha256, b'{"not": "a list"}')
    assert wheel_members(http(), cache, file) == names and len(server.requests) == requests_before + 1


def test_wheel_members_of_a_server_without_ranges_and_of_a_non_zip(server, cache):
    server.ranges = False
    server.add(*demo_wheel("1.0"), metadata=False)
    server.add("demo-2.0-py3-none-any.whl", b"not a zip" * 10_000, metadata=False)
    first, second = index_files(http(), cache, server.url + "/simple", "demo")
    assert "demo/payload.bin" in wheel_members(http(), cache, first)
    with pytest.raises(IndexAccessError, match="not a readable zip"):
        wheel_members(http(), cache, second)


def test_server_without_ranges_gets_a_full_download_and_is_remembered(server, cache):
    server.ranges = False
    server.add(*demo_wheel("1.0"), metadata=False)
    server.add(*demo_wheel("2.0"), metadata=False)
    first, second = index_files(http(), cache, server.url + "/simple", "demo")
    assert core_metadata(http(), cache, first).how == "download"
    requests_before = len(server.requests)
    shown = []
    assert core_metadata(http(), cache, second, progress=lambda name, done, total: shown.append((done, total))).how == "download"
    assert ["Range" not in headers for _, headers in server.requests[requests_before:]] == [True]
    assert shown[0] == (0, len(second_data := server.file(second.filename))) and shown[-1][0] == len(second_data)


def test_a_failure_is_retried_and_retry_after_honoured(server, cache):
    server.add(*make_wheel("demo", "1.0"))
    server.fail["/simple/demo/"] = [500, 503]
    server.retry_after = "7"
    waits = []
    files = index_files(Http(sleep=waits.append), cache, server.url + "/simple", "demo")
    assert len(files) == 1 and waits == [7.0, 7.0]


def test_backoff_without_retry_after_doubles(server, cache):
    server.add(*make_wheel("demo", "1.0"))
    server.fail["/simple/demo/"] = [502, 502, 502]
    waits = []
    index_files(Http(sleep=waits.append), cache, server.url + "/simple", "demo")
    assert waits == [0.5, 1.0, 2.0]


def test_persistent_failure_is_one_line_naming_url_and_status(server, cache):
    server.fail["/simple/demo/"] = [500] * 10
    with pytest.raises(IndexAccessError) as caught:
        index_files(http(retries=2), cache, server.url + "/simple", "demo")
    message = str(caught.value)
    assert "\n" not in message
    assert f"{server.url}/simple/demo/" in message and "(demo)" in message and "HTTP 500 after 3 tries" in message


def test_slow_answer_past_the_timeout(server, cache):
    server.add(*make_wheel("demo", "1.0"))
    server.delay["/simple/demo/"] = 1.0
    with pytest.raises(IndexAccessError, match=r"no answer within 0.2 s after 2 tries"):
        index_files(http(timeout=0.2, retries=1), cache, server.url + "/simple", "demo")


def test_unreachable_index(cache):
    with pytest.raises(IndexAccessError) as caught:
        index_files(http(retries=0), cache, "http://127.0.0.1:9/simple", "demo")
    assert "cannot connect" in str(caught.value) and "\n" not in str(caught.value)


def test_plain_http_is_refused_unless_local_or_trusted(cache):
    with pytest.raises(IndexAccessError, match="only https://"):
        index_files(http(), cache, "http://index.example/simple", "demo")
    Http(trusted_hosts=("index.example",)).check_transport("http://index.example/simple/")
    Http(trusted_hosts=("index.example:8080",)).check_transport("http://index.example:8080/x")
    with pytest.raises(IndexAccessError):
        Http(trusted_hosts=("index.example:8080",)).check_transport("http://index.example:9090/x")


ORIGINS = [
    "http://127.0.0.2/simple/", "http://127.255.255.254:8080/x", "http://[::1]:3141/simple/", "http://localhost/simple/",
    "http://LOCALHOST:1/", "http://128.0.0.1/simple/", "http://[::ffff:127.0.0.1]/simple/", "http://[::2]/",
    "http://127.0.0.1.nip.example/", "http://index.example/simple/", "http://index.example:8080/x", "http://index.example:9090/x",
    "http://10.1.2.3/simple/", "https://anything.example/", "file:///srv/index/",
]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # pip's vendored pkg_resources, on import
@pytest.mark.parametrize("trusted", [(), ("index.example:8080", "10.1.2.3")])
def test_plain_http_goes_where_pip_lets_it_go(trusted):
    """pip's PipSession.is_secure_origin is the oracle: loopback addresses and trusted hosts."""
    from pip._internal.models.link import Link
    from pip._internal.network.session import PipSession

    pip = PipSession(trusted_hosts=list(trusted))
    for url in ORIGINS:
        try:
            Http(trusted_hosts=trusted).check_transport(url)
            ours = True
        except IndexAccessError:
            ours = False
        assert ours == pip.is_secure_origin(Link(url)), url


def test_an_index_on_another_loopback_address_is_used(cache):
    from index_server import IndexServer

    other = IndexServer()
    other.add(*make_wheel("demo", "1.0"))
    other.start("127.0.0.2")
    try:
        (file,) = index_files(http(), cache, other.url + "/simple", "demo")
        assert file.url.startswith("http://127.0.0.2:") and core_metadata(http(), cache, file).name == "demo"
    finally:
        other.stop()


def test_a_body_over_its_cap_is_refused_before_or_while_reading(server, cache, tmp_path):
    server.add(*make_wheel("demo", "1.0"))
    small = Http(sleep=lambda s: None, limits=Limits(page_bytes=100))
    with pytest.raises(LimitExceeded, match=r"/simple/demo/ \(demo\): the server announces \d+ bytes, over the limit of 100 bytes for a project page"):
        index_files(small, cache, server.url + "/simple", "demo")
    assert not os.path.exists(os.path.join(cache.directory, "pages"))  # nothing partial is cached
    page = tmp_path / "page.html"
    page.write_bytes(b"<a href='demo-1.0.tar.gz'></a>" * 10)
    with pytest.raises(LimitExceeded, match=r"page.html \(demo\): more than the limit of 100 bytes for a project page"):
        find_links_files(small, cache, str(page), "demo")


def test_a_slow_body_is_stopped_at_its_deadline_without_retries(cache):
    """A server that sends a page a few bytes at a time within the socket timeout: stopped by the
    request's deadline, once (a limit is not retried)."""
    import socket as sockets
    import threading

    listener = sockets.create_server(("127.0.0.1", 0))
    accepted = []

    def serve() -> None:
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            accepted.append(connection)
            connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 1000000\r\n\r\n")
            try:
                while True:
                    connection.sendall(b"<")
                    time.sleep(0.05)
            except OSError:
                continue

    threading.Thread(target=serve, daemon=True).start()
    slow = Http(timeout=0.5, retries=3, sleep=lambda s: None, limits=Limits(request_seconds=0.5, min_bytes_per_second=100))
    started = time.monotonic()
    with pytest.raises(LimitExceeded, match=r"too slow, \d+ bytes in \d s \(the limit: an answer within 0.5 s, then 100 bytes/s") as raised:
        index_files(slow, cache, f"http://127.0.0.1:{listener.getsockname()[1]}/simple", "demo")
    assert time.monotonic() - started < 3 and len(accepted) == 1 and "\n" not in str(raised.value)
    listener.close()
    for connection in accepted:
        connection.close()


def test_a_zip_that_claims_too_much_is_refused_before_it_is_read(tmp_path):
    from hostile_index import raw_zip

    from cudaresolve.binary.wheel import WheelError, read_wheel

    elf = b"\x7fELF" + bytes(60)
    claims = raw_zip([("lib/libhuge.so", 0, elf, zlib.crc32(elf), 3 << 30)])
    with pytest.raises(WheelError, match=r"libhuge.so claims 3,221,225,472 bytes, over the limit of 2,147,483,648 for one member"):
        read_wheel(io.BytesIO(claims), "huge.whl")
    directory = raw_zip([("lib/libhuge.so", 0, elf, zlib.crc32(elf), len(elf))] * 200)
    with pytest.raises(WheelError, match=r"its central directory is larger than 0 MiB"):
        read_wheel(io.BytesIO(directory), "many.whl", max_directory=1000)
    assert read_wheel(io.BytesIO(directory), "many.whl").members == ()  # 64 bytes of ELF header: unreadable, not refused


def test_redirects_are_followed_and_checked(server, cache):
    server.add(*make_wheel("demo", "1.0"))
    server.redirects["/simple/demo/"] = "/simple/demo/?moved=1"
    (file,) = index_files(http(), cache, server.url + "/simple", "demo")
    assert file.url == f"{server.url}/files/{file.filename}"  # relative links resolve against the final page
    server.redirects["/simple/demo/"] = "http://index.example/simple/demo/"
    with pytest.raises(IndexAccessError, match="refusing http://index.example"):
        index_files(http(), IndexCache(cache.directory + "2"), server.url + "/simple", "demo")


def test_hash_mismatch_refuses_the_download(server, cache):
    server.ranges = False
    filename, data = demo_wheel()
    server.add(filename, data, metadata=False, sha256="0" * 64)
    (file,) = index_files(http(), cache, server.url + "/simple", "demo")
    with pytest.raises(IndexAccessError, match="does not match the index's 0000"):
        core_metadata(http(), cache, file)
    assert cache.blob("metadata", file.sha256, 1 << 20) is None


def test_metadata_file_hash_mismatch(server, cache):
    filename, data = demo_wheel()
    server.add(filename, data)
    (file,) = index_files(http(), cache, server.url + "/simple", "demo")
    object.__setattr__(file, "metadata_hashes", (("sha256", "1" * 64),))
    with pytest.raises(IndexAccessError, match=r"\.metadata: sha256 does not match"):
        core_metadata(http(), cache, file)


def test_truncated_wheel(server, cache):
    filename, data = demo_wheel()
    server.add(filename, data[: len(data) // 2], metadata=False)
    (file,) = index_files(http(), cache, server.url + "/simple", "demo")
    with pytest.raises(IndexAccessError, match="not a readable zip"):
        core_metadata(http(), cache, file)


def test_member_whose_crc_does_not_match(server, cache):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("demo-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: demo\nVersion: 1.0\nRequires-Dist: numpy\n")
    data = buffer.getvalue().replace(b"Requires-Dist: numpy", b"Requires-Dist: numpx")
    server.add("demo-1.0-py3-none-any.whl", data, metadata=False)
    (file,) = index_files(http(), cache, server.url + "/simple", "demo")
    with pytest.raises(IndexAccessError, match="METADATA is damaged .*CRC"):
        core_metadata(http(), cache, file)


def test_metadata_of_another_distribution_is_refused(server, cache):
    server.add(*make_wheel("demo", "1.0", metadata_name="evil"), metadata=False)
    (file,) = index_files(http(), cache, server.url + "/simple", "demo")
    with pytest.raises(IndexAccessError, match="describes evil 1.0, not demo 1.0"):
        core_metadata(http(), cache, file)


def test_page_is_revalidated_after_max_age(server, cache, monkeypatch):
    server.add(*make_wheel("demo", "1.0"))
    index_files(http(), cache, server.url + "/simple", "demo")
    index_files(http(), cache, server.url + "/simple", "demo")
    assert len(server.requests) == 1  # fresh: no request at all
    import cudaresolve.index.cache as cache_module

    monkeypatch.setattr(cache_module, "PAGE_MAX_AGE", 0.0)
    sent = server.bytes_sent
    assert len(index_files(http(), cache, server.url + "/simple", "demo")) == 1
    assert server.requests[-1][1]["If-None-Match"] and server.bytes_sent == sent  # 304, no body


def test_offline_without_the_page_is_a_clear_error(server, cache):
    with pytest.raises(OfflineMiss, match=r"--offline: the page .*/simple/demo/ \(demo\) is not in the cache"):
        index_files(http(), IndexCache(cache.directory, offline=True), server.url + "/simple", "demo")
    assert server.requests == []


def test_refresh_ignores_the_cache(server, cache):
    server.add(*make_wheel("demo", "1.0"))
    index_files(http(), cache, server.url + "/simple", "demo")
    index_files(http(), IndexCache(cache.directory, refresh=True), server.url + "/simple", "demo")
    assert len(server.requests) == 2


def test_file_index_and_find_links_directory(tmp_path, cache):
    filename, data = make_wheel("demo", "1.0", requires=["numpy"])
    files_dir = tmp_path / "files"
    files_dir.mkdir()
    (files_dir / filename).write_bytes(data)
    (files_dir / "unrelated-2.0-py3-none-any.whl").write_bytes(make_wheel("unrelated", "2.0")[1])
    (files_dir / "notes.txt").write_text("not a distribution")
    project = tmp_path / "simple" / "demo"
    project.mkdir(parents=True)
    digest = hashlib.sha256(data).hexdigest()
    (project / "index.html").write_text(f'<a href="../../files/{filename}#sha256={digest}">{filename}</a>')
    (file,) = index_files(http(), cache, (tmp_path / "simple").as_uri(), "demo")
    assert file.url == (files_dir / filename).as_uri() and file.sha256 == digest
    assert core_metadata(http(), cache, file).requires_dist == ("numpy",)
    (linked,) = find_links_files(http(), cache, str(files_dir), "demo")
    assert linked.url == file.url and linked.size == len(data)
    assert core_metadata(http(), cache, linked).how == "local"
    assert index_files(http(), cache, (tmp_path / "simple").as_uri(), "missing") == ()


def _sdist(tmp_path, metadata: str) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        data = metadata.encode()
        info = tarfile.TarInfo("demo-1.0/PKG-INFO")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def test_sdist_pkg_info_only_when_static(tmp_path, cache):
    static = "Metadata-Version: 2.2\nName: demo\nVersion: 1.0\nRequires-Dist: numpy\n"
    dynamic = "Metadata-Version: 2.2\nName: demo\nVersion: 1.0\nDynamic: Requires-Dist\n"
    old = "Metadata-Version: 2.1\nName: demo\nVersion: 1.0\nRequires-Dist: numpy\n"
    links = tmp_path / "links"
    for version, text in (("1.0", static), ("2.0", dynamic), ("3.0", old)):
        directory = tmp_path / version
        directory.mkdir()
        (links / "x").parent.mkdir(exist_ok=True)
        (links / f"demo-{version}.tar.gz").write_bytes(_sdist(tmp_path, text.replace("1.0", version)))
    files = {str(f.version): f for f in find_links_files(http(), cache, str(links), "demo")}
    assert core_metadata(http(), cache, files["1.0"]).requires_dist == ("numpy",)
    with pytest.raises(MetadataUnavailable, match="Requires-Dist is dynamic"):
        core_metadata(http(), cache, files["2.0"])
    with pytest.raises(MetadataUnavailable, match="Metadata-Version 2.1"):
        core_metadata(http(), cache, files["3.0"])


def _writer(directory: str, value: bytes, rounds: int) -> None:
    cache = IndexCache(directory)
    for _ in range(rounds):
        cache.store_blob("metadata", "a" * 64, value)


def test_two_processes_writing_one_entry_leave_a_whole_one(tmp_path):
    import multiprocessing

    values = [bytes([65 + n]) * 200_000 for n in range(2)]
    context = multiprocessing.get_context("fork")
    writers = [context.Process(target=_writer, args=(str(tmp_path), value, 200)) for value in values]
    for process in writers:
        process.start()
    reader = IndexCache(str(tmp_path))
    seen = set()
    while any(process.is_alive() for process in writers):
        read = reader.blob("metadata", "a" * 64, 1 << 20)
        if read is not None:
            seen.add(read)
    for process in writers:
        process.join()
        assert process.exitcode == 0
    assert seen <= set(values) and reader.blob("metadata", "a" * 64, 1 << 20) in values
    assert not [name for name in os.listdir(tmp_path / "metadata" / "aa") if name.startswith(".tmp-")]


def test_a_host_name_that_does_not_resolve_fails_at_once(cache):
    waits = []
    with pytest.raises(IndexAccessError, match="cannot resolve the host name") as caught:
        index_files(Http(trusted_hosts=("no-such-host.invalid",), sleep=waits.append), cache, "http://no-such-host.invalid/simple", "demo")
    assert waits == [] and "no-such-host.invalid/simple/demo/" in str(caught.value)


def test_give_up_fails_a_host_that_failed_once_without_asking_it_again():
    """The doctor's judge: one failure per host, not one (with its retries) per page."""
    waits: list[float] = []
    http = Http(retries=2, sleep=waits.append, give_up=True)
    with pytest.raises(IndexAccessError, match="cannot connect"):
        http.get("http://127.0.0.1:9/simple/a/", cap=Cap(1000, "a project page"))
    asked = http.requests_made
    with pytest.raises(IndexAccessError, match=r"127\.0\.0\.1:9 failed earlier in this run \(cannot fetch http://127\.0\.0\.1:9/simple/a/"):
        http.get("http://127.0.0.1:9/simple/b/", cap=Cap(1000, "a project page"))
    assert (http.requests_made, waits) == (asked, [0.5, 1.0])  # the first request's retries only
    plain = Http(retries=0)
    for page in ("a", "b"):
        with pytest.raises(IndexAccessError, match="cannot connect"):
            plain.get(f"http://127.0.0.1:9/simple/{page}/", cap=Cap(1000, "a project page"))
    assert plain.requests_made == 2
