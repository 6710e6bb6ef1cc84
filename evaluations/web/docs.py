"""The documentation, served under Help: the Markdown files of `docs/` and the README,
rendered here from the same files a reader of the repository sees.

Docs ship with the code: they are read from `settings.EVALSITE_DOCS_DIR` (the checkout's
`docs/`, next to `settings.BASE_DIR`'s templates), never from the static files, so they
work the same in the embedded mode and after `collectstatic` on a team server. Every
`*.md` directly in that folder is a page, so a page another change adds appears in the
Help index with no code change; its images are the files of `docs/img/`.

Rendering: Markdown (tables, fenced code, heading ids) and then nh3 with an allow-list,
so raw HTML in a page can never add a script, an event handler or a `javascript:` link;
only nh3's output is marked safe. Links are rewritten for the site as they are cleaned:
`docs/x.md` (or `x.md` from a docs page) becomes `/help/x/`, `../README.md` the README's
page, `img/a.png` the Help image URL; a link to any other file of the repository (source
code the server does not serve) keeps its text and loses its link.
"""

from __future__ import annotations

import posixpath
import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from html import unescape
from pathlib import Path
from urllib.parse import urlsplit

import markdown  # type: ignore[import-untyped,unused-ignore]
import nh3
from django.conf import settings
from django.urls import reverse
from django.utils.safestring import SafeString, mark_safe

README_SLUG = "readme"
IMAGE_SUFFIXES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".webp": "image/webp",
                  ".gif": "image/gif"}  # no SVG: an SVG is a document that can carry script
# The pages a newcomer reads in this order; any other page follows, by title.
ORDER = ["readme", "evalsets", "curating", "runs", "evaluators", "reviewing", "grading", "traces", "recipes",
         "api", "cli-and-ci", "configuration", "team-server", "security", "benchmarks", "architecture",
         "development"]

ALLOWED_TAGS = {"h1", "h2", "h3", "h4", "h5", "h6", "p", "br", "hr", "em", "strong", "code", "pre", "blockquote",
                "ul", "ol", "li", "a", "img", "table", "thead", "tbody", "tr", "th", "td", "del", "sup", "sub"}
HEADINGS = {"h1", "h2", "h3", "h4", "h5", "h6"}
ALLOWED_ATTRIBUTES = {"a": {"href", "title"}, "img": {"src", "alt", "title"}, "th": {"align"}, "td": {"align"},
                      **{h: {"id"} for h in HEADINGS}}
URL_SCHEMES = {"http", "https", "mailto"}


@dataclass(frozen=True)
class Heading:
    level: int
    id: str
    title: str


@dataclass(frozen=True)
class DocPage:
    slug: str
    filename: str  # as the repository names it: "README.md", "docs/runs.md"
    title: str
    html: SafeString
    toc: tuple[Heading, ...]  # the page's h2 and h3

    @property
    def sections(self) -> tuple[Heading, ...]:
        return tuple(h for h in self.toc if h.level == 2)


def docs_dir() -> Path:
    return Path(settings.EVALSITE_DOCS_DIR)


def _readme() -> Path:
    return docs_dir().parent / "README.md"


def slugify_heading(value: str, separator: str = "-") -> str:
    """GitHub's heading anchors, so `#the-cli-python-managepy-eval` works on GitHub and here."""
    value = unicodedata.normalize("NFKC", value).strip().lower()
    value = re.sub(r"[^\w\- ]", "", value)
    return value.replace(" ", separator)


def page_files() -> dict[str, Path]:
    """Every page by its slug: the README, then each `docs/*.md` (its name, lower case)."""
    files: dict[str, Path] = {}
    if _readme().is_file():
        files[README_SLUG] = _readme()
    folder = docs_dir()
    if folder.is_dir():
        for path in sorted(folder.glob("*.md")):
            slug = path.stem.lower()
            if path.is_file() and re.fullmatch(r"[a-z0-9][a-z0-9_-]*", slug) and slug != README_SLUG:
                files[slug] = path
    return files


def image_path(name: str) -> Path | None:
    """A file of `docs/img/` by its exact name, if it is an image; never anything else."""
    folder = docs_dir() / "img"
    if Path(name).suffix.lower() not in IMAGE_SUFFIXES or not folder.is_dir():
        return None
    for path in folder.iterdir():  # chosen from the folder's listing: no path from the URL is opened
        if path.name == name and path.is_file():
            return path
    return None


def _link(value: str, source: str, slugs: dict[str, str]) -> str | None:
    """Where a link of the page at `source` (repository-relative) points on the site."""
    parts = urlsplit(value)
    if parts.scheme or parts.netloc or not parts.path:  # external (nh3 checks the scheme) or "#anchor"
        return value
    fragment = f"#{parts.fragment}" if parts.fragment else ""
    target = posixpath.normpath(posixpath.join(posixpath.dirname(source), parts.path))
    if target in slugs:
        return reverse("help_page", args=[slugs[target]]) + fragment
    if target == "docs":
        return reverse("help_index")
    folder, name = posixpath.split(target)
    if folder == "docs/img" and Path(name).suffix.lower() in IMAGE_SUFFIXES:
        return reverse("help_image", args=[name])
    return None  # another file of the repository: the server does not serve it


def render(text: str, *, source: str, slugs: dict[str, str]) -> tuple[SafeString, list[Heading]]:
    """Markdown to sanitised HTML with the site's links, and its headings."""
    md = markdown.Markdown(extensions=["tables", "fenced_code", "toc", "sane_lists"],
                           extension_configs={"toc": {"slugify": slugify_heading},
                                              "tables": {"use_align_attribute": True}}, output_format="html")
    html = md.convert(text)

    def keep(tag: str, attribute: str, value: str) -> str | None:
        if attribute in {"href", "src"}:
            return _link(value, source, slugs)
        return value

    cleaned = nh3.clean(html, tags=ALLOWED_TAGS, attributes=ALLOWED_ATTRIBUTES, url_schemes=URL_SCHEMES,
                        attribute_filter=keep, link_rel="noopener", strip_comments=True)
    headings: list[Heading] = []

    def walk(tokens: list[dict[str, object]]) -> None:
        for token in tokens:
            headings.append(Heading(int(str(token["level"])), str(token["id"]), str(token["name"])))
            children = token.get("children")
            if isinstance(children, list):
                walk(children)

    walk(md.toc_tokens)
    return mark_safe(cleaned), headings  # noqa: S308 - nh3's output, nothing else


@lru_cache(maxsize=64)
def _page(slug: str, path: str, mtime_ns: int, source: str, slugs: tuple[tuple[str, str], ...]) -> DocPage:
    text = Path(path).read_text(encoding="utf-8")
    html, headings = render(text, source=source, slugs=dict(slugs))
    title = next((h.title for h in headings if h.level == 1), Path(path).stem)
    # toc_tokens hold the heading's text with its HTML escaped; the template escapes again
    toc = tuple(Heading(h.level, h.id, unescape(h.title)) for h in headings if h.level in (2, 3))
    return DocPage(slug=slug, filename=source, title=unescape(title), html=html, toc=toc)


def _sources(files: dict[str, Path]) -> dict[str, str]:
    """Each page's path as the repository names it, to its slug (for rewriting links)."""
    return {("README.md" if slug == README_SLUG else f"docs/{path.name}"): slug for slug, path in files.items()}


def doc_page(slug: str) -> DocPage | None:
    files = page_files()
    path = files.get(slug)
    if path is None:
        return None
    sources = _sources(files)
    source = next(s for s, sl in sources.items() if sl == slug)
    return _page(slug, str(path), path.stat().st_mtime_ns, source, tuple(sorted(sources.items())))


def doc_index() -> list[DocPage]:
    """Every page, in reading order: the known ones first, then the others by title."""
    pages = [page for slug in page_files() if (page := doc_page(slug)) is not None]
    rank = {slug: i for i, slug in enumerate(ORDER)}
    return sorted(pages, key=lambda p: (rank.get(p.slug, len(ORDER)), p.title.lower()))


CURL_MARKER = "<!-- otlp-curl-example -->"


def otlp_curl_example(server: str) -> str | None:
    """The raw OTLP/JSON curl example of docs/traces.md, for the Traces page: one source, so
    the page shows exactly what the docs show and their test sends; `$EVALSITE` filled in
    with this server's address (the token stays `$TOKEN`: the page never holds one)."""
    path = page_files().get("traces")
    if path is None:
        return None
    match = re.search(re.escape(CURL_MARKER) + r"\n```bash\n(.*?)\n```", path.read_text(encoding="utf-8"), re.S)
    return match.group(1).replace("$EVALSITE", server) if match else None
