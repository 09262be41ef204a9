'use strict';
// Markdown to DOM for replies from the model and tools.
//
// Nothing here ever parses HTML: every character of the source enters the
// page through textContent or a text node, and the only elements are the
// ones this renderer creates. A "<script>" in a reply is therefore shown as
// the text "<script>" and never runs (webchat's browser test proves it).
// Links get an href only for http(s) and mailto URLs.
const Markdown = (() => {
  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  const fence = /^\s{0,3}(`{3,}|~{3,})\s*([^\s`]*)/;
  const heading = /^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
  const rule = /^\s{0,3}([-*_])(\s*\1){2,}\s*$/;
  const quote = /^\s{0,3}>\s?/;
  const item = /^(\s*)([-*+]|\d{1,9}[.)])\s+(.*)$/;
  const tableSep = /^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$/;

  function startsBlock(line) {
    return fence.test(line) || heading.test(line) || rule.test(line) || quote.test(line) || item.test(line);
  }

  function blocks(src) {
    const lines = src.replace(/\r\n?/g, '\n').split('\n');
    const out = [];
    let i = 0;
    while (i < lines.length) {
      const line = lines[i];
      let m;
      if ((m = line.match(fence))) {
        const marker = m[1];
        const body = [];
        i++;
        // An unclosed fence (a reply still streaming) runs to the end.
        while (i < lines.length && !lines[i].trim().startsWith(marker)) body.push(lines[i++]);
        i++;
        out.push(codeBlock(m[2], body.join('\n')));
        continue;
      }
      if (line.trim() === '') { i++; continue; }
      if ((m = line.match(heading))) {
        const h = el('h' + Math.min(m[1].length + 1, 6));
        inline(m[2], h);
        out.push(h);
        i++;
        continue;
      }
      if (rule.test(line)) { out.push(el('hr')); i++; continue; }
      if (quote.test(line)) {
        const inner = [];
        while (i < lines.length && quote.test(lines[i])) inner.push(lines[i++].replace(quote, ''));
        const bq = el('blockquote');
        bq.append(...blocks(inner.join('\n')));
        out.push(bq);
        continue;
      }
      if ((m = line.match(item))) {
        const ordered = /\d/.test(m[2]);
        const list = el(ordered ? 'ol' : 'ul');
        if (ordered && parseInt(m[2], 10) !== 1) list.start = parseInt(m[2], 10);
        let cur = null;
        while (i < lines.length) {
          const l = lines[i];
          const im = l.match(item);
          if (im && /\d/.test(im[2]) === ordered) {
            cur = [im[3]];
            list.append(listItem(cur));
          } else if (l.trim() !== '' && cur && !startsBlock(l)) {
            cur.push(l.trim());
            list.lastChild.replaceWith(listItem(cur));
          } else break;
          i++;
        }
        out.push(list);
        continue;
      }
      if (line.includes('|') && i + 1 < lines.length && tableSep.test(lines[i + 1])) {
        const rows = [line];
        i += 2;
        while (i < lines.length && lines[i].includes('|') && lines[i].trim() !== '') rows.push(lines[i++]);
        out.push(table(rows));
        continue;
      }
      const para = [];
      while (i < lines.length && lines[i].trim() !== '' && !(para.length && startsBlock(lines[i]))) para.push(lines[i++]);
      const p = el('p');
      para.forEach((l, n) => {
        if (n) p.append(el('br'));
        inline(l, p);
      });
      out.push(p);
    }
    return out;
  }

  function listItem(parts) {
    const li = el('li');
    inline(parts.join(' '), li);
    return li;
  }

  function cells(row) {
    return row.trim().replace(/^\|/, '').replace(/\|$/, '').split('|').map(c => c.trim());
  }

  function table(rows) {
    const t = el('table');
    rows.forEach((r, n) => {
      const tr = el('tr');
      cells(r).forEach(c => {
        const td = el(n === 0 ? 'th' : 'td');
        inline(c, td);
        tr.append(td);
      });
      t.append(tr);
    });
    const wrap = el('div', 'table-wrap');
    wrap.append(t);
    return wrap;
  }

  function codeBlock(lang, code) {
    const wrap = el('div', 'code-block');
    const bar = el('div', 'code-bar');
    bar.append(el('span', 'code-lang', lang || 'text'));
    const copy = el('button', 'copy', 'Copy');
    copy.type = 'button';
    copy.addEventListener('click', () => copyText(code, copy));
    bar.append(copy);
    const pre = el('pre');
    pre.append(el('code', lang ? 'lang-' + lang : '', code));
    wrap.append(bar, pre);
    return wrap;
  }

  function copyText(text, button) {
    const done = () => {
      button.textContent = 'Copied';
      setTimeout(() => { button.textContent = 'Copy'; }, 1500);
    };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(done, () => fallbackCopy(text, done));
    } else fallbackCopy(text, done);
  }

  // Pages served over plain http to another host have no clipboard API.
  function fallbackCopy(text, done) {
    const ta = el('textarea');
    ta.value = text;
    ta.style.position = 'fixed';
    ta.style.opacity = '0';
    document.body.append(ta);
    ta.select();
    try { document.execCommand('copy'); done(); } catch (_) { /* nothing to do */ }
    ta.remove();
  }

  function safeURL(raw) {
    try {
      const u = new URL(raw, location.href);
      return ['http:', 'https:', 'mailto:'].includes(u.protocol) ? u.href : null;
    } catch (_) {
      return null;
    }
  }

  const inlineRe = new RegExp([
    '(`+)([^`]|[^`][\\s\\S]*?[^`])\\1(?!`)', // 1,2 code span
    '\\*\\*(\\S[\\s\\S]*?)\\*\\*', // 3 strong
    '(?<!\\w)__(\\S[\\s\\S]*?)__(?!\\w)', // 4 strong (never inside a word)
    '\\*(\\S[^*]*?)\\*', // 5 em
    '(?<!\\w)_(\\S[^_]*?)_(?!\\w)', // 6 em (never inside a word)
    '~~(\\S[\\s\\S]*?)~~', // 7 strike
    '\\[([^\\]]+)\\]\\(([^)\\s]+)\\)', // 8,9 link
    '(https?:\\/\\/[^\\s<>()]*[^\\s<>().,;:!?\'"])', // 10 bare URL
  ].join('|'), 'g');

  function inline(text, parent) {
    let last = 0;
    inlineRe.lastIndex = 0;
    for (const m of text.matchAll(inlineRe)) {
      if (m.index > last) parent.append(document.createTextNode(text.slice(last, m.index)));
      last = m.index + m[0].length;
      if (m[2] !== undefined) parent.append(el('code', '', m[2]));
      else if (m[3] !== undefined || m[4] !== undefined) nest('strong', m[3] ?? m[4], parent);
      else if (m[5] !== undefined || m[6] !== undefined) nest('em', m[5] ?? m[6], parent);
      else if (m[7] !== undefined) nest('del', m[7], parent);
      else if (m[8] !== undefined) link(m[8], m[9], parent);
      else if (m[10] !== undefined) link(m[10], m[10], parent, true);
    }
    if (last < text.length) parent.append(document.createTextNode(text.slice(last)));
  }

  function nest(tag, text, parent) {
    const e = el(tag);
    inline(text, e);
    parent.append(e);
  }

  // link appends a link; a bare URL's label is the URL itself, which is
  // text (running inline over it would find the same URL again, forever).
  function link(label, href, parent, bare) {
    const url = safeURL(href);
    if (!url) {
      parent.append(document.createTextNode(label));
      return;
    }
    const a = el('a');
    a.href = url;
    a.target = '_blank';
    a.rel = 'noopener noreferrer';
    if (bare) a.append(document.createTextNode(label));
    else inline(label, a);
    parent.append(a);
  }

  return {
    // render replaces target's children with the rendering of src.
    render(src, target) { target.replaceChildren(...blocks(src || '')); },
  };
})();
