'use strict';
// Syntax colouring for code blocks: a small tokenizer of our own (no
// vendored library) that knows comments, strings, numbers, keywords and
// function names in a handful of common languages. It only splits the
// source into pieces and wraps each in a <span> through textContent, so
// code from a model stays text: joined back, the spans are the source.
const Syntax = (() => {
  const words = s => new Set(s.split(' '));
  const cLike = { line: ['//'], block: ['/*', '*/'], strings: '"\'' };
  const langs = {
    js: Object.assign({}, cLike, { strings: '"\'`', kw: words('await async break case catch class const continue debugger default delete do else export extends false finally for from function if import in instanceof let new null of return static super switch this throw true try typeof undefined var void while yield interface type enum implements private public protected readonly as') }),
    go: Object.assign({}, cLike, { strings: '"\'`', kw: words('break case chan const continue default defer else fallthrough for func go goto if import interface map package range return select struct switch type var nil true false iota error string int int64 int32 uint byte rune bool float64 any make new len cap append panic recover') }),
    python: { line: ['#'], strings: '"\'', triple: true, kw: words('and as assert async await break class continue def del elif else except False finally for from global if import in is lambda None nonlocal not or pass raise return True try while with yield self print') },
    bash: { line: ['#'], strings: '"\'', kw: words('if then else elif fi case esac for while until do done in function return exit export local readonly echo cd set unset source true false') },
    sql: { line: ['--'], block: ['/*', '*/'], strings: '\'"', nocase: true, kw: words('select from where and or not insert into values update set delete create table index view drop alter add join left right inner outer full on as group by order having limit offset distinct union all null is in like between exists case when then else end primary key foreign references default returning with') },
    rust: Object.assign({}, cLike, { kw: words('as async await break const continue crate dyn else enum extern false fn for if impl in let loop match mod move mut pub ref return self Self static struct super trait true type unsafe use where while Some None Ok Err') }),
    c: Object.assign({}, cLike, { kw: words('auto break case char const continue default do double else enum extern float for goto if int long register return short signed sizeof static struct switch typedef union unsigned void volatile while class namespace template typename public private protected virtual new delete this true false nullptr bool include define std') }),
    java: Object.assign({}, cLike, { kw: words('abstract boolean break byte case catch char class const continue default do double else enum extends final finally float for if implements import instanceof int interface long new null package private protected public return short static super switch this throw throws true false try void while var') }),
    json: { strings: '"', kw: words('true false null') },
    css: { block: ['/*', '*/'], strings: '"\'', kw: words('important') },
    yaml: { line: ['#'], strings: '"\'', kw: words('true false null yes no') },
  };
  const alias = { javascript: 'js', jsx: 'js', ts: 'js', typescript: 'js', tsx: 'js', mjs: 'js', golang: 'go', py: 'python', sh: 'bash', shell: 'bash', zsh: 'bash', console: 'bash', rs: 'rust', cpp: 'c', 'c++': 'c', h: 'c', cs: 'java', csharp: 'java', kotlin: 'java', kt: 'java', yml: 'yaml', postgres: 'sql', postgresql: 'sql', jsonc: 'json' };

  function spec(lang) {
    const l = (lang || '').toLowerCase();
    return langs[alias[l] || l] || null;
  }

  function span(cls, text) {
    const s = document.createElement('span');
    s.className = cls;
    s.textContent = text;
    return s;
  }

  // highlight fills target with code coloured as lang and reports whether
  // lang is one it knows (an unknown one gets the plain text).
  function highlight(lang, code, target) {
    const sp = spec(lang);
    if (!sp) {
      target.textContent = code;
      return false;
    }
    const out = [];
    let plain = '';
    const flush = () => { if (plain) { out.push(document.createTextNode(plain)); plain = ''; } };
    const push = (cls, text) => { flush(); out.push(span(cls, text)); };
    let i = 0;
    const n = code.length;
    while (i < n) {
      const rest = code.startsWith.bind(code);
      let matched = false;
      for (const c of sp.line || []) {
        if (rest(c, i)) {
          let j = code.indexOf('\n', i);
          if (j < 0) j = n;
          push('tok-com', code.slice(i, j));
          i = j;
          matched = true;
          break;
        }
      }
      if (matched) continue;
      if (sp.block && rest(sp.block[0], i)) {
        let j = code.indexOf(sp.block[1], i + sp.block[0].length);
        j = j < 0 ? n : j + sp.block[1].length;
        push('tok-com', code.slice(i, j));
        i = j;
        continue;
      }
      const ch = code[i];
      if (sp.strings && sp.strings.includes(ch)) {
        const q = sp.triple && rest(ch + ch + ch, i) ? ch + ch + ch : ch;
        let j = i + q.length;
        while (j < n && !rest(q, j)) {
          if (code[j] === '\\') j++;
          else if (q.length === 1 && ch !== '`' && code[j] === '\n') break;
          j++;
        }
        j = Math.min(n, rest(q, j) ? j + q.length : j);
        push('tok-str', code.slice(i, j));
        i = j;
        continue;
      }
      if (/[0-9]/.test(ch) && !/[\w$]/.test(code[i - 1] || '')) {
        const m = /^(0[xX][0-9a-fA-F_]+|[0-9][0-9_]*(\.[0-9_]+)?([eE][+-]?[0-9]+)?)/.exec(code.slice(i, i + 64));
        push('tok-num', m[0]);
        i += m[0].length;
        continue;
      }
      if (/[A-Za-z_$]/.test(ch)) {
        let j = i + 1;
        while (j < n && /[\w$]/.test(code[j])) j++;
        const w = code.slice(i, j);
        if (sp.kw && sp.kw.has(sp.nocase ? w.toLowerCase() : w)) push('tok-kw', w);
        else if (code[j] === '(' && sp !== langs.json) push('tok-fn', w);
        else plain += w;
        i = j;
        continue;
      }
      plain += ch;
      i++;
    }
    flush();
    target.replaceChildren(...out);
    return true;
  }

  return { highlight };
})();
