'use strict';
// Markdown to DOM for replies from the model and tools.
//
// Nothing here ever parses HTML: every character of the source enters the
// page through textContent or a text node, and the only elements are the
// ones this renderer creates. A "<script>" in a reply is therefore shown as
// the text "<script>" and never runs (webchat's browser test proves it).
// Links get an href only for http(s) and mailto URLs. Code blocks are
// coloured by syntax.js (spans of text); math ($…$, $$…$$, \(…\), \[…\])
// is drawn by the small TeX subset below, again from text nodes only.
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
  const mathOpen = /^\s{0,3}(\$\$|\\\[)/;

  function startsBlock(line) {
    return fence.test(line) || mathOpen.test(line) || heading.test(line) || rule.test(line) || quote.test(line) || item.test(line);
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
      if ((m = line.match(mathOpen))) {
        // $$ … $$ or \[ … \] (on one line or several): display math.
        const close = m[1] === '$$' ? '$$' : '\\]';
        let body = line.trim().slice(2);
        i++;
        if (body.endsWith(close) && body.length >= close.length) body = body.slice(0, -close.length);
        else {
          const more = [];
          while (i < lines.length && !lines[i].trim().endsWith(close)) more.push(lines[i++]);
          if (i < lines.length) more.push(lines[i++].trim().slice(0, -close.length));
          body = [body].concat(more).join(' ');
        }
        out.push(Math_.render(body, true));
        continue;
      }
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
        const sep = lines[i + 1];
        i += 2;
        while (i < lines.length && lines[i].includes('|') && lines[i].trim() !== '') rows.push(lines[i++]);
        out.push(table(rows, sep));
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

  function table(rows, sep) {
    const t = el('table');
    const align = cells(sep).map(c => (c.endsWith(':') ? (c.startsWith(':') ? 'center' : 'right') : (c.startsWith(':') ? 'left' : '')));
    rows.forEach((r, n) => {
      const tr = el('tr');
      cells(r).forEach((c, k) => {
        const td = el(n === 0 ? 'th' : 'td');
        if (align[k]) td.style.textAlign = align[k];
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
    const c = el('code', lang ? 'lang-' + lang : '');
    if (typeof Syntax === 'undefined' || !Syntax.highlight(lang, code, c)) c.textContent = code;
    pre.append(c);
    wrap.append(bar, pre);
    const lines = code.split('\n').length;
    if (lines > foldLines) fold(wrap, pre, lines);
    return wrap;
  }

  // Code longer than foldLines is folded: its first lines and a button
  // that shows the rest (and folds it again).
  const foldLines = 20;

  function fold(wrap, box, lines) {
    box.classList.add('folded');
    const more = 'Show all ' + lines + ' lines';
    const b = el('button', 'fold-toggle', more);
    b.type = 'button';
    b.setAttribute('aria-expanded', 'false');
    b.addEventListener('click', () => {
      const open = box.classList.toggle('folded') === false;
      b.textContent = open ? 'Fold' : more;
      b.setAttribute('aria-expanded', String(open));
    });
    wrap.append(b);
  }

  function copyText(text, button) {
    const label = button.textContent;
    const done = () => {
      button.textContent = 'Copied';
      setTimeout(() => { button.textContent = label; }, 1500);
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
    '\\$(?![\\s$])([^$\\n]+?)(?<!\\s)\\$(?![\\d$])', // 11 inline math $…$ (not "$5 and $10")
    '\\\\\\(([\\s\\S]+?)\\\\\\)', // 12 inline math \(…\)
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
      else if (m[11] !== undefined || m[12] !== undefined) parent.append(Math_.render(m[11] ?? m[12], false));
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

  // Math_ draws a small subset of TeX with elements and text nodes: Greek
  // letters and common symbols, ^ and _ (sup, sub), \frac, \sqrt, \text.
  // Anything else stays as its source text. (KaTeX would cover all of TeX
  // but is ~300 KB of script plus fonts: too much for this page.)
  const Math_ = (() => {
    const sym = {
      alpha: 'α', beta: 'β', gamma: 'γ', delta: 'δ', epsilon: 'ε', varepsilon: 'ε', zeta: 'ζ', eta: 'η', theta: 'θ',
      iota: 'ι', kappa: 'κ', lambda: 'λ', mu: 'μ', nu: 'ν', xi: 'ξ', pi: 'π', rho: 'ρ', sigma: 'σ', tau: 'τ',
      upsilon: 'υ', phi: 'φ', varphi: 'φ', chi: 'χ', psi: 'ψ', omega: 'ω', Gamma: 'Γ', Delta: 'Δ', Theta: 'Θ',
      Lambda: 'Λ', Xi: 'Ξ', Pi: 'Π', Sigma: 'Σ', Phi: 'Φ', Psi: 'Ψ', Omega: 'Ω',
      times: '×', cdot: '·', pm: '±', mp: '∓', div: '÷', leq: '≤', le: '≤', geq: '≥', ge: '≥', neq: '≠', ne: '≠',
      approx: '≈', equiv: '≡', sim: '∼', propto: '∝', infty: '∞', sum: '∑', prod: '∏', int: '∫', oint: '∮',
      partial: '∂', nabla: '∇', to: '→', rightarrow: '→', leftarrow: '←', Rightarrow: '⇒', Leftarrow: '⇐',
      leftrightarrow: '↔', Leftrightarrow: '⇔', mapsto: '↦', in: '∈', notin: '∉', subset: '⊂', subseteq: '⊆',
      supset: '⊃', cup: '∪', cap: '∩', emptyset: '∅', forall: '∀', exists: '∃', neg: '¬', land: '∧', lor: '∨',
      cdots: '⋯', ldots: '…', dots: '…', prime: '′', circ: '∘', log: 'log', ln: 'ln', sin: 'sin', cos: 'cos',
      tan: 'tan', exp: 'exp', lim: 'lim', max: 'max', min: 'min', det: 'det',
      ',': '\u2009', ';': '\u2005', ':': '\u2005', quad: '\u2003', qquad: '\u2003\u2003', '{': '{', '}': '}', '\\': ' ',
      left: '', right: '', displaystyle: '', '!': '',
    };

    const spaced = new Set(('times cdot pm mp div leq le geq ge neq ne approx equiv sim propto to rightarrow leftarrow ' +
      'Rightarrow Leftarrow leftrightarrow Leftrightarrow mapsto in notin subset subseteq supset cup cap land lor circ').split(' '));

    function render(src, display) {
      const box = el(display ? 'div' : 'span', display ? 'math math-block' : 'math');
      box.setAttribute('role', 'math');
      box.setAttribute('aria-label', src);
      box.title = src;
      const p = { s: src, i: 0 };
      seq(p, box, '');
      return box;
    }

    // seq appends atoms to parent until the end or the closing char.
    function seq(p, parent, close) {
      while (p.i < p.s.length) {
        const ch = p.s[p.i];
        if (ch === close) { p.i++; return; }
        if (ch === '^' || ch === '_') {
          p.i++;
          const e = el(ch === '^' ? 'sup' : 'sub');
          atom(p, e);
          parent.append(e);
          continue;
        }
        atom(p, parent);
      }
    }

    // atom appends one item: a {group}, a \command, or one character.
    function atom(p, parent) {
      const ch = p.s[p.i];
      if (ch === undefined) return;
      if (ch === '{') {
        p.i++;
        const g = el('span');
        seq(p, g, '}');
        parent.append(g);
        return;
      }
      if (ch === '\\') {
        const m = /^\\([A-Za-z]+|.)/.exec(p.s.slice(p.i));
        p.i += m ? m[0].length : 1;
        const name = m ? m[1] : '';
        if (name === 'frac' || name === 'dfrac' || name === 'tfrac') {
          const f = el('span', 'frac');
          const num = el('span', 'num');
          const den = el('span', 'den');
          atom(p, num);
          atom(p, den);
          f.append(num, den);
          parent.append(f);
        } else if (name === 'sqrt') {
          parent.append(document.createTextNode('√'));
          const r = el('span', 'sqrt');
          atom(p, r);
          parent.append(r);
        } else if (['text', 'mathrm', 'textrm', 'operatorname', 'mathbf', 'textbf'].includes(name)) {
          const t = el('span', name.includes('bf') ? 'bold' : '');
          if (p.s[p.i] === '{') {
            const j = p.s.indexOf('}', p.i);
            t.textContent = p.s.slice(p.i + 1, j < 0 ? p.s.length : j);
            p.i = j < 0 ? p.s.length : j + 1;
          } else atom(p, t);
          parent.append(t);
        } else if (Object.prototype.hasOwnProperty.call(sym, name)) {
          // Relations and binary operators get thin spaces, as TeX sets them.
          parent.append(document.createTextNode(spaced.has(name) ? '\u2009' + sym[name] + '\u2009' : sym[name]));
        } else {
          parent.append(document.createTextNode('\\' + name));
        }
        return;
      }
      p.i++;
      if (/[A-Za-z]/.test(ch)) parent.append(el('var', '', ch));
      else if (/\s/.test(ch)) { /* TeX ignores spaces in math */ }
      else parent.append(document.createTextNode('=+<>'.includes(ch) ? '\u2009' + ch.replace('-', '−') + '\u2009' : ch === '-' ? '−' : ch));
    }

    return { render };
  })();

  return {
    // render replaces target's children with the rendering of src.
    render(src, target) { target.replaceChildren(...blocks(src || '')); },
    // copy puts text on the clipboard and says so on button.
    copy: copyText,
  };
})();
