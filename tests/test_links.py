"""Rule links point at a page that exists, or are left out (devlint.links)."""

from __future__ import annotations

from urllib.parse import unquote, urlparse

from devlint import links
from devlint.formats import sarif
from devlint.rules import all_rules


def test_local_links_reach_every_rules_anchor():
    page = links.local_rules_page()
    assert page is not None  # the tests run from the checkout
    text = page.read_text(encoding="utf-8")
    for rule in all_rules():
        url = links.rule_docs_url(rule.code, local=True)
        base, _, anchor = url.partition("#")
        assert unquote(urlparse(base).path) == str(page)
        assert f'<a id="{anchor}"></a>' in text


def test_no_link_without_a_page(monkeypatch):
    monkeypatch.setattr(links, "local_rules_page", lambda: None)
    assert links.rule_docs_url("DEV101", local=True) is None
    entry = sarif.rule_entry(all_rules()[0])
    assert "helpUri" not in entry and entry["help"]["markdown"]


def test_a_documentation_project_url_is_used(monkeypatch):
    class Meta:
        def get_all(self, key):
            return ["Homepage, https://example.org/devlint", "Documentation, https://example.org/devlint/rules"]

    import importlib.metadata as md
    monkeypatch.setattr(md, "metadata", lambda name: Meta())
    assert links.rule_docs_url("DEV205") == "https://example.org/devlint/rules#dev205"
    assert sarif.information_uri() == "https://example.org/devlint"
