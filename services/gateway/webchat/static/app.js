'use strict';
// Waggle web chat: a client of the public HTTP API (docs/api.md) and
// nothing else. State that must survive a reload (the user token in team
// mode, the running turn and its resume point, the open session) lives in
// localStorage.
(() => {
  const $ = id => document.getElementById(id);

  const store = {
    get(k) {
      try { return JSON.parse(localStorage.getItem('waggle.' + k)); } catch (_) { return null; }
    },
    set(k, v) { localStorage.setItem('waggle.' + k, JSON.stringify(v)); },
    del(k) { localStorage.removeItem('waggle.' + k); },
  };

  const state = {
    mode: 'local',
    token: null,
    workspace: null,
    session: null,
    sessions: [],
    turn: null,
    sending: false,
    leaving: false,
    pending: [],
    // teams are the signed-in user's teams on a team server
    // (GET /api/teams: {id, name, role}); workspaces are created in one.
    teams: [],
    // answered maps requestId → the label of the decision taken here.
    answered: new Map(),
    // listed is the workspace's last full session listing (branchOf
    // included): what the branch switchers are computed from.
    listed: [],
    // editing is the user message being edited ({el}), or null.
    editing: null,
  };

  class APIError extends Error {
    constructor(status, message, code) {
      super(message);
      this.status = status;
      this.code = code;
    }
  }

  // ---- HTTP ----------------------------------------------------------

  async function request(method, path, body, extra) {
    const init = { method, headers: Object.assign({}, extra) };
    if (state.token) init.headers.Authorization = 'Bearer ' + state.token;
    if (body !== undefined) {
      init.headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    let resp;
    try {
      resp = await fetch(path, init);
    } catch (_) {
      throw new APIError(0, 'The server cannot be reached.');
    }
    if (!resp.ok) throw await apiError(resp);
    return resp;
  }

  async function api(method, path, body) {
    const resp = await request(method, path, body);
    const type = resp.headers.get('Content-Type') || '';
    return type.includes('json') ? resp.json() : resp.text();
  }

  // apiError reads the server's error body: ours ({error, code}) or
  // Fastify's ({statusCode, error, message}), whose message is the useful part.
  async function apiError(resp) {
    let message = resp.statusText || 'Request failed';
    let code;
    try {
      const b = await resp.json();
      message = (b.statusCode && b.message) ? b.message : (b.error || b.message || message);
      code = b.code;
    } catch (_) { /* not JSON: keep the status text */ }
    // A local server reached from another machine wants its token too.
    if (resp.status === 401) askToken('The server refused your token: ' + message);
    return new APIError(resp.status, message, code);
  }

  function enc(s) { return encodeURIComponent(s); }

  // ---- Server-Sent Events over fetch ---------------------------------
  // EventSource cannot send an Authorization header or POST, so streams
  // are read with fetch and parsed here.
  async function readSSE(resp, onEvent) {
    const reader = resp.body.getReader();
    const dec = new TextDecoder();
    let buf = '';
    let ev = { id: null, event: 'message', data: [] };
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += dec.decode(value, { stream: true });
      let nl;
      while ((nl = buf.indexOf('\n')) >= 0) {
        let line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        if (line.endsWith('\r')) line = line.slice(0, -1);
        if (line === '') {
          if (ev.data.length) {
            let data;
            try { data = JSON.parse(ev.data.join('\n')); } catch (_) { data = { content: ev.data.join('\n') }; }
            onEvent({ id: ev.id, event: ev.event, data });
          }
          ev = { id: null, event: 'message', data: [] };
          continue;
        }
        if (line[0] === ':') continue;
        const c = line.indexOf(':');
        const field = c < 0 ? line : line.slice(0, c);
        let v = c < 0 ? '' : line.slice(c + 1);
        if (v[0] === ' ') v = v.slice(1);
        if (field === 'id') ev.id = v;
        else if (field === 'event') ev.event = v;
        else if (field === 'data') ev.data.push(v);
      }
    }
  }

  // ---- errors and small DOM helpers ----------------------------------

  function showError(err) {
    const status = err.status ? err.status + ' · ' : '';
    const code = err.code ? ' (' + err.code + ')' : '';
    $('error-text').textContent = status + (err.message || String(err)) + code;
    $('error').hidden = false;
  }

  function hideError() { $('error').hidden = true; }

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function button(label, cls, onClick) {
    const b = el('button', cls, label);
    b.type = 'button';
    b.addEventListener('click', onClick);
    return b;
  }

  function pretty(v) {
    if (typeof v === 'string') return v;
    try { return JSON.stringify(v, null, 2); } catch (_) { return String(v); }
  }

  function nearBottom() {
    const m = $('messages');
    return m.scrollHeight - m.scrollTop - m.clientHeight < 160;
  }

  // scrollDown follows new content while the reader is at the bottom; one
  // who scrolled up to read stays put and gets a "Latest" button instead.
  function scrollDown() {
    const m = $('messages');
    if (nearBottom()) m.scrollTop = m.scrollHeight;
    $('jump').hidden = nearBottom();
  }

  function jumpToLatest() {
    const m = $('messages');
    m.scrollTop = m.scrollHeight;
    $('jump').hidden = true;
  }

  // cleanTitle shows an auto-title (the first message, cut short by the
  // server) without its Markdown: no **, backticks, heading marks or link
  // targets in the sidebar.
  function cleanTitle(t) {
    if (typeof t !== 'string') return String(t ?? '');
    const c = t
      .replace(/!?\[([^\]]*)\]\([^)]*\)?/g, '$1')
      .replace(/(\*\*|__|~~|`+)/g, '')
      .replace(/(^|\s)[*_]+(?=\S)|(?<=\S)[*_]+(?=\s|$)/g, '$1')
      .replace(/^\s{0,3}(#{1,6}|>|[-+*]|\d+[.)])\s+/, '')
      .replace(/\s+/g, ' ')
      .trim();
    return c || t;
  }

  // ---- token (team mode) ---------------------------------------------

  let tokenWaiters = [];

  function askToken(why) {
    const dlg = $('token-dialog');
    $('token-error').hidden = !why;
    $('token-error').textContent = why || '';
    if (!dlg.open) dlg.showModal();
    $('token-input').focus();
    return new Promise(resolve => tokenWaiters.push(resolve));
  }

  async function saveToken(e) {
    e.preventDefault();
    const tok = $('token-input').value.trim();
    if (!tok) return;
    state.token = tok;
    try {
      await api('GET', '/api/workspaces');
    } catch (err) {
      $('token-error').textContent = err.status === 401 ? 'That token is not valid.' : err.message;
      $('token-error').hidden = false;
      return;
    }
    store.set('token', tok);
    $('sign-out').hidden = false;
    $('token-input').value = '';
    $('token-dialog').close();
    const waiters = tokenWaiters;
    tokenWaiters = [];
    waiters.forEach(w => w());
  }

  // ---- workspaces and sessions ---------------------------------------

  // writableTeams are the teams the user may create workspaces in.
  function writableTeams() { return state.teams.filter(t => t.role !== 'viewer'); }

  async function loadTeams() {
    try {
      const r = await api('GET', '/api/teams');
      state.teams = Array.isArray(r.teams) ? r.teams.filter(t => t && typeof t.id === 'string') : [];
    } catch (err) {
      showError(err);
      state.teams = [];
    }
  }

  async function loadWorkspaces() {
    let list = [];
    try {
      list = await api('GET', '/api/workspaces');
    } catch (err) {
      showError(err);
    }
    if (!Array.isArray(list)) list = list.workspaces || [];
    // A team server has no workspace everyone shares: a user without one
    // yet is offered to create one (in one of their teams), not sent to a
    // "default" workspace that is not theirs.
    if (state.mode === 'team' && !list.length) {
      state.workspace = null;
      $('workspace').replaceChildren();
      offerWorkspace();
      return;
    }
    const sel = $('workspace');
    sel.replaceChildren();
    // A user in several teams sees the workspaces grouped by team.
    const grouped = state.mode === 'team' && state.teams.length > 1;
    const groups = new Map();
    for (const w of list) {
      const o = el('option', '', w.name || w.id);
      o.value = w.id;
      if (!grouped) {
        sel.append(o);
        continue;
      }
      const team = w.teamId || '';
      if (!groups.has(team)) {
        const t = state.teams.find(x => x.id === team);
        const g = el('optgroup');
        g.label = t ? (t.name || t.id) : (team || 'No team');
        groups.set(team, g);
        sel.append(g);
      }
      groups.get(team).append(o);
    }
    const want = store.get('workspace');
    const pick = list.find(w => w.id === want) || list.find(w => w.id === 'default') || list[0];
    state.workspace = pick ? pick.id : 'default';
    if (!pick) {
      const o = el('option', '', 'default');
      o.value = 'default';
      sel.append(o);
    }
    sel.value = state.workspace;
  }

  async function selectWorkspace(id) {
    state.workspace = id;
    store.set('workspace', id);
    $('workspace').value = id;
    $('search').value = '';
    if (!$('memory').hidden) loadMemory();
    filesState.dir = '/';
    await probeFiles();
    await loadSessions();
  }

  // The workspace form creates a workspace or renames the current one.
  let workspaceFormMode = 'create';

  // offerWorkspace opens the create form for a user with no workspace.
  function offerWorkspace() {
    const teams = writableTeams();
    $('workspace-hint').textContent = teams.length
      ? 'You have no workspace yet. Name one to start chatting.'
      : 'You have no workspace yet, and no team you can create one in. Ask a team admin to add you as a member.';
    $('workspace-hint').hidden = false;
    workspaceFormMode = '';
    showWorkspaceForm('create');
  }

  function showWorkspaceForm(mode) {
    const form = $('workspace-form');
    if (!form.hidden && workspaceFormMode === mode) {
      form.hidden = true;
      return;
    }
    if (state.workspace) $('workspace-hint').hidden = true;
    workspaceFormMode = mode;
    // On a team server a new workspace belongs to one of the user's
    // teams: a choice when there are several.
    const teams = mode === 'create' && state.mode === 'team' ? writableTeams() : [];
    const teamSel = $('workspace-team');
    teamSel.replaceChildren();
    for (const t of teams) {
      const o = el('option', '', t.name || t.id);
      o.value = t.id;
      teamSel.append(o);
    }
    teamSel.hidden = teams.length < 2;
    const sel = $('workspace');
    $('workspace-name').value = mode === 'rename' && sel.selectedOptions[0] ? sel.selectedOptions[0].textContent : '';
    $('workspace-submit').textContent = mode === 'rename' ? 'Save' : 'Create';
    form.hidden = false;
    $('workspace-name').focus();
  }

  async function submitWorkspace(e) {
    e.preventDefault();
    const name = $('workspace-name').value.trim();
    if (!name) return;
    try {
      let id = state.workspace;
      if (workspaceFormMode === 'rename') {
        await api('PATCH', '/api/workspaces/' + enc(id), { name });
      } else {
        const body = { name };
        if (state.mode === 'team') {
          const teamId = $('workspace-team').value || (writableTeams()[0] || {}).id;
          if (!teamId) throw new APIError(0, 'You are in no team you can create a workspace in. Ask a team admin to add you.');
          body.teamId = teamId;
        }
        id = (await api('POST', '/api/workspaces', body)).id;
      }
      $('workspace-name').value = '';
      $('workspace-form').hidden = true;
      $('workspace-hint').hidden = true;
      store.set('workspace', id);
      await loadWorkspaces();
      if (workspaceFormMode !== 'rename') {
        await selectWorkspace(id);
        newChat();
      }
    } catch (err) {
      showError(err);
    }
  }

  // deleteWorkspace deletes the current workspace (its sessions and
  // memories too) on the second click.
  async function deleteWorkspace() {
    const btn = $('delete-workspace');
    if (state.turn) return;
    if (!btn.classList.contains('confirm')) {
      btn.classList.add('confirm');
      btn.textContent = 'Delete it and all its sessions?';
      return;
    }
    btn.classList.remove('confirm');
    btn.textContent = 'Delete';
    try {
      await api('DELETE', '/api/workspaces/' + enc(state.workspace));
    } catch (err) {
      showError(err);
      return;
    }
    store.del('workspace');
    await loadWorkspaces();
    await selectWorkspace(state.workspace);
    newChat();
  }

  async function loadSessions() {
    if (!state.workspace) { // a team-server user without a workspace yet
      state.sessions = [];
      renderSessions();
      return;
    }
    const q = $('search').value.trim();
    const ws = enc(state.workspace);
    try {
      if (q.length >= 2) {
        const r = await api('GET', '/api/workspaces/' + ws + '/sessions/search?q=' + enc(q) + '&limit=50');
        const results = Array.isArray(r) ? r : (r.results || []);
        state.sessions = results.map(s => ({
          id: s.sessionId,
          title: typeof s.title === 'string' ? s.title : s.sessionId,
          snippet: s.snippets && s.snippets[0] ? (s.snippets[0].text || s.snippets[0].content || '') : '',
        }));
      } else {
        const r = await api('GET', '/api/workspaces/' + ws + '/sessions');
        state.sessions = Array.isArray(r) ? r : [];
        state.listed = state.sessions;
      }
    } catch (err) {
      if (!(err.status === 400 && q)) showError(err);
      state.sessions = [];
    }
    renderSessions();
  }

  function renderSessions() {
    const ul = $('sessions');
    ul.replaceChildren();
    for (const s of state.sessions) {
      const li = el('li', s.id === state.session ? 'session current' : 'session');
      li.dataset.id = s.id;
      const open = button(cleanTitle(s.title || s.id), 'open', () => openSession(s.id));
      open.title = cleanTitle(s.title || s.id);
      li.append(open);
      if (s.branchOf) li.append(el('span', 'branch-mark', '↳ branch'));
      if (s.snippet) li.append(el('div', 'snippet', s.snippet));
      li.append(button('Rename', 'rename', () => startRename(li, s)));
      li.append(button('Delete', 'delete', ev => deleteSession(ev.currentTarget, s)));
      ul.append(li);
    }
    if (!state.sessions.length) ul.append(el('li', 'empty', $('search').value.trim() ? 'No matching sessions' : 'No sessions yet'));
    const cur = state.sessions.find(s => s.id === state.session);
    if (cur) $('title').textContent = cleanTitle(cur.title || cur.id);
  }

  function startRename(li, s) {
    const input = el('input', 'rename-input');
    input.value = s.title || '';
    input.setAttribute('aria-label', 'New title');
    li.replaceChildren(input);
    input.focus();
    input.select();
    let done = false;
    const finish = async save => {
      if (done) return;
      done = true;
      const title = input.value.trim();
      if (save && title && title !== s.title) {
        try {
          await api('PATCH', '/api/sessions/' + enc(s.id) + '?workspace=' + enc(state.workspace), { title });
        } catch (err) {
          showError(err);
        }
      }
      await loadSessions();
    };
    input.addEventListener('keydown', e => {
      if (e.key === 'Enter') { e.preventDefault(); finish(true); }
      if (e.key === 'Escape') finish(false);
    });
    input.addEventListener('blur', () => finish(true));
  }

  // deleteSession asks once (the button turns into "Confirm") and deletes
  // on the second click.
  async function deleteSession(btn, s) {
    if (!btn.classList.contains('confirm')) {
      btn.classList.add('confirm');
      btn.textContent = 'Confirm delete';
      return;
    }
    try {
      await api('DELETE', '/api/sessions/' + enc(s.id) + '?workspace=' + enc(state.workspace));
      if (state.session === s.id) newChat();
    } catch (err) {
      showError(err);
    }
    await loadSessions();
  }

  function newChat() {
    if (state.turn || state.sending) return;
    state.session = null;
    store.del('session');
    $('messages').replaceChildren();
    $('title').textContent = 'New chat';
    $('jump').hidden = true;
    cancelEdit();
    renderSessions();
    closeMenu();
    $('input').focus();
  }

  async function openSession(id) {
    state.session = id;
    store.set('session', { workspace: state.workspace, id });
    cancelEdit(true);
    closeMenu();
    renderSessions();
    const box = $('messages');
    box.replaceChildren();
    try {
      const h = await api('GET', '/api/history?workspace=' + enc(state.workspace) + '&session=' + enc(id));
      if (state.session !== id) return box; // another session was opened meanwhile
      // Tool events are grouped by the turn that made them and drawn
      // with that turn's reply, as they were shown live.
      const tools = new Map();
      for (const t of h.tools || []) {
        if (!t || !t.turnId) continue;
        if (!tools.has(t.turnId)) tools.set(t.turnId, []);
        tools.get(t.turnId).push(t);
      }
      (h.messages || []).forEach((m, i) => {
        if (m.role === 'user') addUser(m.content).dataset.index = String(i);
        else addAssistant(m.content, m, (m.turnId && tools.get(m.turnId)) || []);
      });
      await showBranches();
    } catch (err) {
      showError(err);
    }
    box.scrollTop = box.scrollHeight;
    $('jump').hidden = true;
    lastReplyActions();
    return box;
  }

  // sources keeps each message's own text (a reply's Markdown source) for
  // Copy, Edit and Regenerate.
  const sources = new WeakMap();

  function addUser(text) {
    const m = el('div', 'msg user');
    m.append(el('div', 'bubble', text));
    sources.set(m, text);
    const bar = el('div', 'msg-actions');
    bar.append(
      button('Copy', 'copy-msg', ev => Markdown.copy(sources.get(m), ev.currentTarget)),
      button('Edit', 'edit-msg', () => startEdit(m)),
    );
    m.append(bar);
    $('messages').append(m);
    scrollDown();
    return m;
  }

  // replyActions gives a finished reply its Copy button (Regenerate and
  // Continue are added to the last reply only, by lastReplyActions).
  function replyActions(m, text) {
    sources.set(m, text);
    const bar = el('div', 'msg-actions');
    bar.append(button('Copy', 'copy-msg', ev => Markdown.copy(sources.get(m), ev.currentTarget)));
    m.append(bar);
  }

  // lastReplyActions offers Regenerate (and Continue, for a reply that
  // was stopped or failed) on the last reply while nothing runs.
  function lastReplyActions() {
    document.querySelectorAll('#messages .regen, #messages .continue').forEach(b => b.remove());
    if (state.turn || state.sending) return;
    const msgs = [...document.querySelectorAll('#messages .msg')];
    const last = msgs[msgs.length - 1];
    const bar = last && last.classList.contains('assistant') && last.querySelector(':scope > .msg-actions');
    const asked = [...msgs].reverse().find(x => x.classList.contains('user'));
    if (!bar || !asked) return;
    bar.append(button('Regenerate', 'regen', () => sendText(sources.get(asked))));
    if (last.querySelector(':scope > .note.turn-error')) {
      bar.append(button('Continue', 'continue', () => sendText('Continue from where you stopped.')));
    }
  }

  // Edit puts a message back into the composer to change and send.
  // Sending it makes a branch (sendEdit): a new session with the messages
  // before it, where the edited text is sent; the original session is
  // unchanged, and the message's ‹ › switcher goes between the two.
  function startEdit(m) {
    const text = sources.get(m);
    const input = $('input');
    input.value = text;
    state.editing = { el: m };
    document.querySelectorAll('#messages .msg.editing').forEach(x => x.classList.remove('editing'));
    m.classList.add('editing');
    $('editing').hidden = false;
    input.focus();
    input.setSelectionRange(text.length, text.length);
  }

  function cancelEdit(clear) {
    if (state.editing) state.editing.el.classList.remove('editing');
    state.editing = null;
    if ($('editing').hidden) return;
    $('editing').hidden = true;
    if (clear) $('input').value = '';
  }

  // ---- branches --------------------------------------------------------
  // A branch is a session made by POST …/sessions/:id/branch {at}: copies
  // of the first `at` messages of the session it came from, recorded in
  // its listing entry as branchOf {session, at}. Message i of a session
  // has as alternatives the sessions that differ from it first at i.

  function listedSession(id) { return state.listed.find(s => s.id === id); }

  // branchesAt lists the sessions branched from session id at message i,
  // oldest first.
  function branchesAt(id, i) {
    return state.listed
      .filter(s => s.branchOf && s.branchOf.session === id && s.branchOf.at === i)
      .sort((a, b) => String(a.created).localeCompare(String(b.created)) || a.id.localeCompare(b.id));
  }

  // alternatives are the sessions to switch between at message i of
  // session id, in order, id among them. Messages before a branch point
  // are copies of the source's, so their alternatives are the source's
  // (with this session standing in for the source).
  function alternatives(id, i, depth = 0) {
    const b = (listedSession(id) || {}).branchOf;
    if (b && i <= b.at && depth < 32 && listedSession(b.session)) {
      const list = alternatives(b.session, i, depth + 1);
      return i < b.at ? list.map(x => (x === b.session ? id : x)) : list;
    }
    return [id, ...branchesAt(id, i).map(s => s.id)];
  }

  // showBranches puts a ‹ n / N › switcher on each user message that has
  // alternatives (from a fresh listing of the workspace's sessions).
  async function showBranches() {
    const id = state.session;
    if (!id) return;
    try {
      const r = await api('GET', '/api/workspaces/' + enc(state.workspace) + '/sessions');
      state.listed = Array.isArray(r) ? r : [];
    } catch (_) {
      return; // the history is shown; only the switchers are missing
    }
    if (state.session !== id) return;
    document.querySelectorAll('#messages .msg.user:not(.failed)').forEach(m => {
      const old = m.querySelector(':scope > .branches');
      if (old) old.remove();
      if (m.dataset.index === undefined) return;
      const alts = alternatives(id, Number(m.dataset.index));
      if (alts.length < 2) return;
      const k = alts.indexOf(id);
      const nav = el('div', 'branches');
      nav.setAttribute('role', 'group');
      nav.setAttribute('aria-label', 'Versions of this message');
      const go = j => () => { if (!state.turn && !state.sending) openSession(alts[j]); };
      const prev = button('‹', 'branch-prev', go(k - 1));
      prev.setAttribute('aria-label', 'Previous version');
      prev.disabled = k <= 0;
      const next = button('›', 'branch-next', go(k + 1));
      next.setAttribute('aria-label', 'Next version');
      next.disabled = k >= alts.length - 1;
      nav.append(prev, el('span', 'branch-pos', (k + 1) + ' / ' + alts.length), next);
      m.insertBefore(nav, m.querySelector(':scope > .msg-actions'));
    });
  }

  // sendEdit branches the open session at the message being edited and
  // sends text there. The message's index is the server's: the k-th user
  // message on screen is the k-th in the stored history (a refused send
  // is marked failed and was never stored).
  async function sendEdit(text) {
    const ed = state.editing;
    if (!text.trim() || state.turn || state.sending || !state.session) return;
    const users = [...document.querySelectorAll('#messages .msg.user:not(.failed)')];
    const k = users.indexOf(ed.el);
    hideError();
    state.sending = true;
    let branch;
    try {
      const h = await api('GET', '/api/history?workspace=' + enc(state.workspace) + '&session=' + enc(state.session));
      const at = (h.messages || []).map((m, i) => (m.role === 'user' ? i : -1)).filter(i => i >= 0)[k];
      if (k < 0 || at === undefined) throw new APIError(0, 'That message is not in the stored history; it cannot be edited.');
      branch = await api('POST', '/api/workspaces/' + enc(state.workspace) + '/sessions/' + enc(state.session) + '/branch', { at });
    } catch (err) {
      showError(err);
      return;
    } finally {
      state.sending = false;
    }
    await openSession(branch.id);
    $('input').value = text;
    await sendText(text, true);
  }

  // fileActions are the tools whose successful call wrote a file (the
  // turn runner's file_created events), with the note shown for them.
  const fileActions = { write_file: 'Created ', edit_file: 'Edited ', generate_docx: 'Created ' };

  // addAssistant draws a stored reply: its turn's tool calls (input,
  // result, denial) and files first, then the text, then why the turn
  // ended early when it did. Every stored string becomes text, never HTML.
  function addAssistant(text, stored, tools) {
    const m = el('div', 'msg assistant');
    if (stored && stored.turnId) m.dataset.turnId = stored.turnId;
    if (tools && tools.length) {
      const log = el('details', 'activity');
      log.append(el('summary', '', 'Activity · ' + tools.length + (tools.length === 1 ? ' tool call' : ' tool calls')));
      for (const t of tools) {
        const failed = t.isError || t.status === 'error' || t.status === 'denied';
        const card = el('details', failed ? 'tool failed' : 'tool');
        card.append(el('summary', '', '⚙ ' + (t.name || 'tool')));
        card.append(el('pre', 'tool-input', pretty(t.input)));
        if (t.status === 'denied') card.append(el('div', 'approval-outcome', 'Denied'));
        else card.append(el('pre', failed ? 'tool-result error-text' : 'tool-result', pretty(t.result)));
        log.append(card);
      }
      m.append(log);
      for (const t of tools) {
        const path = t.input && typeof t.input === 'object' ? t.input.path : '';
        if (fileActions[t.name] && path && typeof path === 'string' && !(t.isError || t.status !== 'success')) {
          const note = el('div', 'note file', fileActions[t.name] + path);
          m.append(note);
          showImage(note, path);
        }
      }
    }
    const body = el('div', 'md');
    Markdown.render(text, body);
    m.append(body);
    if (stored && stored.error) {
      const stopped = stored.error === 'cancelled';
      m.append(el('div', 'note turn-error' + (stopped ? ' stopped' : ''),
        stopped ? 'Stopped — the turn was cancelled before it finished.' : 'Failed — ' + stored.error));
    }
    replyActions(m, text);
    $('messages').append(m);
    return m;
  }

  // ---- one turn ------------------------------------------------------

  // TurnView renders one turn's events as they arrive: text as Markdown,
  // steps and tool calls in a collapsible activity log, approvals, files
  // and model switches inline where they happened.
  class TurnView {
    constructor(turn, root) {
      this.turn = turn;
      this.root = root || pendingReply();
      this.root.dataset.turnId = turn.id;
      this.thinking = this.root.querySelector('.thinking');
      this.text = '';
      this.seg = null;
      this.log = null;
      this.tools = [];
      this.frame = 0;
      this.stopped = false;
    }

    // busy shows the spinner at the end of the reply while the agent works
    // with nothing streaming (before the first token, between tool calls),
    // and hides it while text streams or an approval waits for the user.
    busy(on) {
      if (!this.thinking) return;
      this.thinking.hidden = !on;
      if (on && this.root.lastChild !== this.thinking) this.root.append(this.thinking);
    }

    handle(ev) {
      const d = ev.data || {};
      switch (ev.event) {
        case 'token': this.token(d.content || ''); break;
        case 'step': this.logItem(el('div', 'step', d.content || '')); break;
        case 'tool': this.tool(d); break;
        case 'tool_result': this.toolResult(d); break;
        case 'file_created':
          this.inlineNote('file', (d.fileAction === 'edit' ? 'Edited ' : 'Created ') + (d.filePath || ''));
          if (typeof d.filePath === 'string') showImage(this.root.lastChild, d.filePath);
          break;
        case 'model_switch': this.inlineNote('switch', 'Switched to ' + (d.model || '?') + (d.reason ? ' — ' + d.reason : '')); break;
        case 'approval_required': this.approval(d); break;
        case 'done': this.done(d); break;
        case 'error': this.error(d); break;
        default: break;
      }
      if (this.thinking && ['step', 'tool', 'tool_result', 'file_created', 'model_switch'].includes(ev.event)) this.busy(true);
      scrollDown();
    }

    token(t) {
      this.busy(false);
      if (!this.seg) {
        this.seg = { el: el('div', 'md'), text: '' };
        this.root.append(this.seg.el);
        this.log = null;
      }
      this.seg.text += t;
      this.text += t;
      // Re-render at most once a frame: long replies stream many tokens.
      if (!this.frame) {
        this.frame = requestAnimationFrame(() => this.flush());
      }
    }

    flush() {
      if (this.frame) cancelAnimationFrame(this.frame);
      this.frame = 0;
      if (!this.seg) return;
      // Rendering grows the reply after scrollDown looked: a reader who
      // was at the bottom stays there.
      const follow = nearBottom();
      Markdown.render(this.seg.text, this.seg.el);
      if (follow) $('messages').scrollTop = $('messages').scrollHeight;
      $('jump').hidden = nearBottom();
    }

    activity() {
      if (!this.log) {
        this.flush();
        this.log = el('details', 'activity');
        this.log.open = true;
        this.log.append(el('summary', '', 'Activity'));
        this.root.append(this.log);
        this.seg = null;
      }
      return this.log;
    }

    logItem(node) {
      const log = this.activity();
      log.append(node);
      const steps = log.querySelectorAll(':scope > .step').length;
      const tools = log.querySelectorAll(':scope > .tool:not(.after)').length;
      const results = log.querySelectorAll(':scope > .tool.after').length;
      const parts = [];
      if (steps) parts.push(steps + (steps === 1 ? ' step' : ' steps'));
      if (tools) parts.push(tools + (tools === 1 ? ' tool call' : ' tool calls'));
      if (results) parts.push(results + (results === 1 ? ' result' : ' results'));
      log.firstChild.textContent = 'Activity · ' + parts.join(', ');
    }

    tool(d) {
      const t = el('details', 'tool');
      t.append(el('summary', '', '⚙ ' + (d.name || 'tool')));
      t.append(el('pre', 'tool-input', pretty(d.input)));
      this.logItem(t);
      this.tools.push({ name: d.name, el: t, done: false, approval: null });
    }

    toolResult(d) {
      const t = this.tools.find(x => !x.done && x.name === d.name);
      if (t) t.done = true;
      const res = el('pre', d.isError ? 'tool-result error-text' : 'tool-result', pretty(d.result));
      if (t && t.approval) {
        // The call waited for an approval: its result comes after the
        // card that allowed (or denied) it, where it happened.
        const after = el('details', d.isError ? 'tool after failed' : 'tool after');
        after.open = true;
        after.append(el('summary', '', '⚙ ' + (d.name || 'tool') + ' · result'), res);
        this.logItem(after);
        return;
      }
      const target = t ? t.el : this.activity();
      target.append(res);
      if (t && d.isError) t.el.classList.add('failed');
    }

    inlineNote(cls, text) {
      this.flush();
      this.root.append(el('div', 'note ' + cls, text));
      this.seg = null;
      this.log = null;
    }

    approval(d) {
      this.flush();
      this.busy(false);
      const card = approvalCard(d.requestId, d.toolName, d.input, d.sourceWorkspaceId);
      const t = this.tools.find(x => !x.done && !x.approval && x.name === d.toolName);
      if (t) t.approval = card;
      this.root.append(card);
      this.seg = null;
      this.log = null;
      refreshApprovals();
    }

    finish() {
      this.flush();
      if (this.thinking) this.thinking.remove();
      this.thinking = null;
      this.root.classList.remove('running');
      this.root.querySelectorAll('details.activity').forEach(d => { d.open = false; });
      // An approval nobody answered before the turn ended was not
      // "answered": say that the turn ended (or was stopped) without it.
      // (A call whose result came was answered, here or elsewhere.)
      this.root.querySelectorAll('.approval').forEach(card => {
        const id = card.dataset.requestId;
        if (state.answered.has(id)) return;
        const t = this.tools.find(x => x.approval === card);
        if (t && t.done) markAnswered(id, 'Answered', true);
        else markAnswered(id, this.stopped ? 'Not answered — the turn was stopped' : 'Not answered — the turn ended', true);
      });
      if (!sources.has(this.root)) replyActions(this.root, this.text);
    }

    done(d) {
      // done carries the final text, which may add notes to what streamed.
      if (typeof d.content === 'string' && d.content.startsWith(this.text) && d.content.length > this.text.length) {
        this.token(d.content.slice(this.text.length));
      }
      this.finish();
      const parts = [];
      if (d.model) parts.push(d.model);
      const u = d.tokens || d.usage || {};
      const inT = u.input ?? u.inputTokens ?? u.prompt_tokens;
      const outT = u.output ?? u.outputTokens ?? u.completion_tokens;
      if (inT || outT) parts.push((inT || 0) + ' in / ' + (outT || 0) + ' out');
      if (typeof d.cost === 'number') parts.push('$' + d.cost.toFixed(6));
      if (parts.length) this.tail(el('div', 'meta', parts.join(' · ')));
    }

    // tail adds what follows a finished reply (its cost line, why it
    // ended) above the reply's action buttons.
    tail(node) {
      this.root.insertBefore(node, this.root.querySelector(':scope > .msg-actions'));
    }

    error(d) {
      this.stopped = d.code === 'cancelled' || /cancel/i.test(d.message || '');
      this.finish();
      this.tail(el('div', 'note turn-error', d.message || 'The turn failed.'));
    }
  }

  // pendingReply is the reply's place, with its spinner, from the moment a
  // message is sent until the turn's first token.
  function pendingReply() {
    const m = el('div', 'msg assistant running');
    const t = el('div', 'thinking');
    t.setAttribute('role', 'status');
    t.append(el('span', 'spinner'), el('span', '', 'Thinking…'));
    m.append(t);
    $('messages').append(m);
    scrollDown();
    return m;
  }

  function send() {
    if (state.editing) return sendEdit($('input').value);
    return sendText($('input').value, true);
  }

  // sendText sends text as a new message of the open session (a new one
  // when none is open). fromInput: the text is the composer's (cleared on
  // success, given back on a rejection).
  async function sendText(text, fromInput) {
    const input = $('input');
    if (typeof text !== 'string' || !text.trim() || state.turn || state.sending) return;
    if (!state.workspace) {
      offerWorkspace();
      return;
    }
    state.sending = true; // until the turn starts (or is refused): no second send
    setRunning(true);
    $('stop').hidden = true; // nothing to stop before the turn has an id
    hideError();
    try {
      if (!state.session) {
        const s = await api('POST', '/api/workspaces/' + enc(state.workspace) + '/sessions', {});
        state.session = s.id;
        store.set('session', { workspace: state.workspace, id: state.session });
      }
    } catch (err) {
      showError(err);
      state.sending = false;
      setRunning(false);
      return;
    }
    if (fromInput) input.value = '';
    cancelEdit();
    lastReplyActions();
    const userEl = addUser(text);
    // Its index in the stored history: after the messages on screen that
    // were stored (those of the history, and the replies since).
    userEl.dataset.index = String(document.querySelectorAll('#messages .msg:not(.failed)').length - 1);
    jumpToLatest();
    const pending = pendingReply();
    let resp;
    try {
      const body = { message: text, workspace: state.workspace, session: state.session };
      if ($('model').value) body.model = $('model').value;
      resp = await request('POST', '/api/chat', body);
    } catch (err) {
      // Rejected before any stream started: say why and give the text back.
      showError(err);
      pending.remove();
      userEl.classList.add('failed');
      if (fromInput || !input.value) input.value = text;
      state.sending = false;
      setRunning(false);
      return;
    }
    state.sending = false;
    const turn = { id: resp.headers.get('X-Waggle-Turn-Id'), workspace: state.workspace, session: state.session, message: text, lastEventId: null };
    loadSessions();
    await follow(turn, resp, pending);
  }

  // follow renders a turn until its terminal event: from resp when given,
  // then (after a cut connection, or after a reload) from the turn's event
  // route, resuming after the last event id seen.
  async function follow(turn, resp, pending) {
    state.turn = turn;
    store.set('turn', turn);
    setRunning(true);
    const view = new TurnView(turn, pending);
    let finished = false;
    let attempts = 0;
    for (;;) {
      if (resp) {
        const before = turn.lastEventId;
        try {
          await readSSE(resp, ev => {
            if (ev.id) {
              turn.lastEventId = ev.id;
              store.set('turn', turn);
            }
            view.handle(ev);
            if (ev.event === 'done' || ev.event === 'error') finished = true;
          });
        } catch (_) { /* cut: resume below */ }
        resp = null;
        if (turn.lastEventId !== before) attempts = 0; // progress: count cuts afresh
      }
      if (finished || state.leaving) break;
      if (attempts++ >= 5) {
        view.finish();
        showError(new APIError(0, 'Lost the connection to this turn.'));
        break;
      }
      if (attempts > 1) await new Promise(r => setTimeout(r, 400 * attempts));
      try {
        resp = await request('GET', '/api/chat/turns/' + enc(turn.id) + '/events', undefined,
          { 'Last-Event-ID': turn.lastEventId || '0' });
      } catch (err) {
        if (err.status === 404) {
          view.finish();
          view.tail(el('div', 'note turn-error', 'This turn is no longer available; its reply is in the history.'));
          break;
        }
        if (err.status && err.status < 500) {
          view.finish();
          showError(err);
          break;
        }
      }
    }
    if (state.leaving) return;
    if (document.hidden) toast('Reply finished', $('title').textContent);
    state.turn = null;
    store.del('turn');
    setRunning(false);
    lastReplyActions();
    loadSessions().then(showBranches);
    refreshApprovals();
  }

  async function resume(saved) {
    await selectWorkspace(saved.workspace);
    await openSession(saved.session);
    const msgs = $('messages').querySelectorAll('.msg.user .bubble');
    const last = msgs[msgs.length - 1];
    if (!last || last.textContent !== saved.message) addUser(saved.message);
    // The page has nothing of the turn rendered: replay it from its first
    // event, then follow it live (not awaited: the page is usable meanwhile).
    saved.lastEventId = null;
    follow(saved, null);
  }

  async function stop() {
    if (!state.turn) return;
    try {
      await api('POST', '/api/chat/turns/' + enc(state.turn.id) + '/cancel');
    } catch (err) {
      showError(err);
    }
  }

  function setRunning(on) {
    $('stop').hidden = !on;
    $('send').disabled = on;
    $('new-session').disabled = on;
    document.body.classList.toggle('running', on);
    if (on) lastReplyActions(); // nothing to regenerate while a turn runs
  }

  // ---- approvals -----------------------------------------------------

  const decisions = {
    once: { approved: true, always: false, label: 'Allowed once' },
    always: { approved: true, always: true, label: 'Always allowed' },
    deny: { approved: false, always: false, label: 'Denied' },
  };

  function approvalCard(requestId, toolName, input, sourceWorkspaceId) {
    const card = el('div', 'approval');
    card.dataset.requestId = requestId;
    card.dataset.created = String(performance.now());
    if (sourceWorkspaceId) card.dataset.sourceWorkspaceId = sourceWorkspaceId;
    card.append(el('div', 'approval-title', 'Allow ' + (toolName || 'this tool') + '?'));
    card.append(el('pre', 'approval-input', pretty(input)));
    const actions = el('div', 'approval-actions');
    const outcome = el('div', 'approval-outcome');
    const answered = state.answered.get(requestId);
    if (answered) outcome.textContent = answered;
    else {
      actions.append(
        button('Allow once', 'allow-once primary', () => decide(requestId, 'once', sourceWorkspaceId)),
        button('Always allow', 'allow-always', () => decide(requestId, 'always', sourceWorkspaceId)),
        button('Deny', 'deny danger', () => decide(requestId, 'deny', sourceWorkspaceId)),
      );
    }
    card.append(actions, outcome);
    return card;
  }

  async function decide(requestId, kind, sourceWorkspaceId) {
    const d = decisions[kind];
    const body = { approved: d.approved, always: d.always };
    if (sourceWorkspaceId) body.sourceWorkspaceId = sourceWorkspaceId;
    let label = d.label;
    try {
      await api('POST', '/api/approval/' + enc(requestId), body);
    } catch (err) {
      if (err.status !== 409 && err.status !== 404) {
        showError(err);
        return;
      }
      label = err.status === 409 ? 'Already decided' : 'No longer pending';
    }
    markAnswered(requestId, label);
    refreshApprovals();
  }

  // markAnswered shows the outcome of an approval on its cards. final:
  // the outcome is known (decided here, or the turn ended without it); a
  // card that just left the pending list gets a provisional label that a
  // final one replaces.
  function markAnswered(requestId, label, final = true) {
    if (final) state.answered.set(requestId, label);
    document.querySelectorAll('.approval').forEach(card => {
      if (card.dataset.requestId !== requestId) return;
      card.querySelector('.approval-actions').replaceChildren();
      card.querySelector('.approval-outcome').textContent = label;
      card.classList.add('answered');
    });
  }

  async function refreshApprovals() {
    const started = performance.now();
    let r;
    try {
      r = await api('GET', '/api/approval/pending');
    } catch (_) {
      return; // shown by the calls the user made; polling stays quiet
    }
    state.pending = r.pending || [];
    noticeApprovals(state.pending);
    const ids = new Set(state.pending.map(p => p.requestId));
    $('approvals-count').textContent = String(state.pending.length);
    $('approvals-toggle').classList.toggle('attention', state.pending.length > 0);
    $('approvals-empty').hidden = state.pending.length > 0;
    const ul = $('approvals-list');
    ul.replaceChildren();
    for (const p of state.pending) {
      const li = el('li');
      const inline = document.querySelector('.approval[data-request-id="' + CSS.escape(p.requestId) + '"]');
      li.append(approvalCard(p.requestId, p.toolName, p.input, inline ? inline.dataset.sourceWorkspaceId : undefined));
      if (p.timestamp) li.append(el('div', 'meta', new Date(p.timestamp).toLocaleString()));
      ul.append(li);
    }
    // An inline card whose request is no longer pending (decided in another
    // tab, timed out, or before a reload) must not offer buttons.
    document.querySelectorAll('#messages .approval').forEach(card => {
      const id = card.dataset.requestId;
      if (Number(card.dataset.created) > started) return; // newer than this answer
      if (card.classList.contains('answered')) return;
      // Decided in another tab or client, timed out, or its turn ended:
      // the card cannot tell which, so it says only that it is over.
      if (!ids.has(id) && !state.answered.has(id)) markAnswered(id, 'No longer pending', false);
    });
  }

  // ---- memory --------------------------------------------------------
  // The memory panel lists what the agent and the user saved for this
  // workspace (and the user's personal mind): search, importance, delete.

  const importances = ['critical', 'important', 'normal', 'temporary', 'deprecated'];

  async function loadMemory() {
    const ul = $('memory-list');
    if (!state.workspace) {
      ul.replaceChildren(el('li', 'meta', 'Create a workspace first.'));
      return;
    }
    const q = $('memory-search').value.trim();
    const ws = 'workspace=' + enc(state.workspace);
    let r;
    try {
      r = q
        ? await api('GET', '/api/memory/search?q=' + enc(q) + '&scope=all&limit=50&' + ws)
        : await api('GET', '/api/memory/frames?limit=100&' + ws);
    } catch (err) {
      showError(err);
      return;
    }
    const frames = (r && Array.isArray(r.results)) ? r.results.filter(f => f && typeof f.id === 'string') : [];
    ul.replaceChildren();
    for (const f of frames) ul.append(frameItem(f));
    if (!frames.length) ul.append(el('li', 'meta', q ? 'Nothing in memory matches.' : 'Nothing saved yet.'));
  }

  function frameItem(f) {
    const li = el('li', 'frame');
    li.dataset.id = f.id;
    li.append(el('div', 'frame-content', String(f.content ?? '')));
    const meta = el('div', 'frame-meta');
    const when = f.created_at || f.timestamp;
    const d = when ? new Date(when) : null;
    meta.append(el('span', '', (f.mind === 'personal' ? 'Personal' : 'Workspace') + ' · ' + String(f.source || '') +
      (d && !isNaN(d) ? ' · ' + d.toLocaleString() : '')));
    const sel = el('select', 'importance');
    sel.setAttribute('aria-label', 'Importance');
    for (const imp of importances) {
      const o = el('option', '', imp);
      o.value = imp;
      sel.append(o);
    }
    sel.value = importances.includes(f.importance) ? f.importance : 'normal';
    sel.addEventListener('change', async () => {
      try {
        await api('PUT', '/api/memory/frames/' + enc(f.id) + '?workspace=' + enc(state.workspace),
          { content: String(f.content ?? ''), importance: sel.value });
        f.importance = sel.value;
      } catch (err) {
        showError(err);
        sel.value = f.importance;
      }
    });
    const del = button('Delete', 'delete', async () => {
      if (!del.classList.contains('confirm')) {
        del.classList.add('confirm');
        del.textContent = 'Forget it?';
        return;
      }
      try {
        await api('DELETE', '/api/memory/frames/' + enc(f.id) + '?workspace=' + enc(state.workspace));
        li.remove();
      } catch (err) {
        showError(err);
      }
    });
    meta.append(sel, del);
    li.append(meta);
    return li;
  }

  function togglePanel(id) {
    const panel = $(id);
    panel.hidden = !panel.hidden;
    $(id + '-toggle').setAttribute('aria-expanded', String(!panel.hidden));
    return !panel.hidden;
  }

  // ---- files ---------------------------------------------------------------
  // The workspace's files through GET /api/workspaces/:id/files/list and
  // /download, and uploads through /upload ({path, name, data: base64}).
  // A server without these routes (404 on the list) hides the Files
  // button, the attach button and dropping. An uploaded file is attached
  // to the message as its workspace path, which the agent's file tools read.

  const filesState = { available: false, dir: '/' };
  const imageTypes = /\.(png|jpe?g|gif|webp)$/i;

  function filesBase() { return '/api/workspaces/' + enc(state.workspace) + '/files/'; }

  async function probeFiles() {
    let ok = false;
    if (state.workspace) {
      try {
        await api('GET', filesBase() + 'list?path=' + enc('/'));
        ok = true;
      } catch (_) {
        ok = false;
      }
    }
    filesState.available = ok;
    $('files-toggle').hidden = !ok;
    $('attach').hidden = !ok;
    if (!ok) $('files').hidden = true;
  }

  async function loadFiles() {
    const ul = $('files-list');
    let entries;
    try {
      entries = await api('GET', filesBase() + 'list?path=' + enc(filesState.dir));
    } catch (err) {
      showError(err);
      return;
    }
    if (!Array.isArray(entries)) entries = (entries && (entries.files || entries.entries)) || [];
    $('files-path').textContent = filesState.dir;
    $('files-up').disabled = filesState.dir === '/';
    ul.replaceChildren();
    for (const f of entries) {
      if (!f || typeof f.name !== 'string') continue;
      const dir = f.type === 'directory' || f.isDirectory === true;
      const path = typeof f.path === 'string' ? f.path : filesState.dir.replace(/\/$/, '') + '/' + f.name;
      const li = el('li', 'file-entry');
      if (dir) {
        li.append(button('📁 ' + f.name, 'name', () => { filesState.dir = path; loadFiles(); }));
      } else {
        li.append(el('span', 'name', f.name));
        if (typeof f.size === 'number') li.append(el('span', 'size', humanSize(f.size)));
        li.append(button('Download', 'download', ev => download(path, f.name, ev.currentTarget)));
      }
      ul.append(li);
    }
    if (!ul.children.length) ul.append(el('li', 'meta', 'No files here yet.'));
  }

  function humanSize(n) {
    if (n < 1024) return n + ' B';
    if (n < 1024 * 1024) return (n / 1024).toFixed(1) + ' KB';
    return (n / 1024 / 1024).toFixed(1) + ' MB';
  }

  // fileBlob fetches a workspace file (with the token, which a plain link
  // could not send).
  async function fileBlob(path) {
    const resp = await request('GET', filesBase() + 'download?path=' + enc(path));
    return resp.blob();
  }

  async function download(path, name, btn) {
    try {
      const url = URL.createObjectURL(await fileBlob(path));
      const a = el('a');
      a.href = url;
      a.download = name;
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10000);
      if (btn) btn.textContent = 'Downloaded';
    } catch (err) {
      showError(err);
    }
  }

  // showImage puts an image file the agent wrote under its note. Only the
  // bytes the server serves become the picture, through a blob: URL, and
  // only when they are an image; the path from the event is a query value.
  async function showImage(note, path) {
    if (!filesState.available || !imageTypes.test(path)) return;
    try {
      const blob = await fileBlob(path);
      if (!/^image\/(png|jpeg|gif|webp)$/.test(blob.type)) return;
      const img = el('img');
      img.alt = path;
      img.src = URL.createObjectURL(blob);
      note.append(img);
    } catch (_) { /* the note still names the file */ }
  }

  function toBase64(file) {
    return new Promise((resolve, reject) => {
      const r = new FileReader();
      r.onload = () => resolve(String(r.result).replace(/^data:[^,]*,/, ''));
      r.onerror = () => reject(r.error);
      r.readAsDataURL(file);
    });
  }

  // upload stores files under /uploads and adds their paths to the
  // message being written.
  async function upload(files) {
    if (!filesState.available || !files || !files.length) return;
    const lines = [];
    for (const f of files) {
      try {
        const e = await api('POST', filesBase() + 'upload', { path: '/uploads', name: f.name, data: await toBase64(f) });
        const path = (e && typeof e.path === 'string' ? e.path : '/uploads/' + f.name).replace(/^\//, '');
        lines.push('[attached: ' + path + ']');
      } catch (err) {
        showError(err);
      }
    }
    if (!lines.length) return;
    const input = $('input');
    input.value = (input.value ? input.value.replace(/\s*$/, '\n') : '') + lines.join('\n');
    input.focus();
    if (!$('files').hidden) loadFiles();
  }

  // ---- notifications ---------------------------------------------------
  // Toasts for what happens out of view: a reply that finished while the
  // tab was hidden, an approval waiting in another session or client, and
  // the server's notifications (GET /api/notifications/stream, the
  // original's SSE of {type: 'notification', title, body, category};
  // absent on a server without the route). While the tab is hidden its
  // title is marked until it is seen again.

  function toast(title, body, action) {
    const t = el('div', 'toast');
    t.append(el('strong', '', String(title || 'Notification')));
    t.append(button('×', 'toast-close', () => t.remove()));
    t.lastChild.setAttribute('aria-label', 'Dismiss');
    if (body) t.append(el('div', 'toast-body', String(body)));
    if (action) t.append(button(action.label, 'toast-action', () => { t.remove(); action.run(); }));
    const box = $('toasts');
    box.append(t);
    while (box.children.length > 4) box.firstChild.remove();
    if (document.hidden) document.title = '● Waggle';
  }

  function showApprovals() {
    if ($('approvals').hidden) togglePanel('approvals');
    refreshApprovals();
  }

  // pendingSince is when each pending approval was first seen: one still
  // not drawn in this page's stream seconds later belongs to another
  // session or client (this page's own cards arrive with their events).
  const pendingSince = new Map();

  function noticeApprovals(pending) {
    const now = performance.now();
    const ids = new Set(pending.map(p => p.requestId));
    for (const id of [...pendingSince.keys()]) if (!ids.has(id)) pendingSince.delete(id);
    for (const p of pending) {
      const inline = document.querySelector('#messages .approval[data-request-id="' + CSS.escape(p.requestId) + '"]');
      if (inline) {
        pendingSince.set(p.requestId, -1); // shown where it belongs
        continue;
      }
      const since = pendingSince.get(p.requestId);
      if (since === undefined) pendingSince.set(p.requestId, now);
      else if (since >= 0 && now - since >= 3000) {
        pendingSince.set(p.requestId, -1);
        toast('Approval waiting', (p.toolName || 'A tool') + ' wants to run in another session.', { label: 'Show', run: showApprovals });
      }
    }
  }

  // sessionAction is a toast's "Open" for a notification about a session
  // (ids from the server; they only ever reach a URL encoded).
  function sessionAction(workspace, session) {
    if (typeof workspace !== 'string' || typeof session !== 'string' || !workspace || !session) return undefined;
    return {
      label: 'Open',
      run: async () => {
        if (state.turn || state.sending) {
          showError(new APIError(0, 'Stop or wait for the running reply first.'));
          return;
        }
        if (workspace !== state.workspace) await selectWorkspace(workspace);
        await openSession(session);
      },
    };
  }

  // followNotifications reads the server's notification stream for as
  // long as the page is open; a server without it (404) is not asked again.
  async function followNotifications() {
    for (let delay = 2000; !state.leaving; delay = Math.min(delay * 2, 60000)) {
      try {
        const resp = await request('GET', '/api/notifications/stream');
        await readSSE(resp, ev => {
          const d = ev.data || {};
          if (ev.event !== 'message') return;
          if (d.type === 'connected') document.body.dataset.notifications = 'connected';
          if (d.type === 'notification') toast(d.title, d.body, sessionAction(d.workspaceId, d.sessionId));
        });
        delete document.body.dataset.notifications;
      } catch (err) {
        if (err.status >= 400 && err.status < 500) return;
      }
      await new Promise(r => setTimeout(r, delay));
    }
  }

  // ---- settings --------------------------------------------------------
  // One dialog over the settings routes: models and budget (GET/PUT
  // /api/settings), default autonomy (/api/settings/permissions), API keys
  // (/api/vault: names only, a value is only ever sent), MCP servers' state
  // (GET /api/mcp/servers). A section whose route is missing (404) or
  // refused (403: not an operator) stays hidden.

  // settingsError shows an error inside the dialog (the page's banner is
  // behind it).
  function settingsError(err) {
    const status = err.status ? err.status + ' · ' : '';
    $('settings-error').textContent = status + (err.message || String(err)) + (err.code ? ' (' + err.code + ')' : '');
    $('settings-error').hidden = false;
  }

  async function section(id, load) {
    try {
      await load();
      $(id).hidden = false;
    } catch (err) {
      $(id).hidden = true;
      if (err.status && err.status !== 404 && err.status !== 403) settingsError(err);
    }
  }

  async function openSettings() {
    const d = $('settings-dialog');
    if (!d.open) d.showModal();
    $('settings-error').hidden = true;
    document.querySelectorAll('#settings-dialog .saved').forEach(s => { s.hidden = true; });
    await Promise.all([
      section('settings-models', async () => {
        const s = await api('GET', '/api/settings');
        $('settings-default-model').value = typeof s.defaultModel === 'string' ? s.defaultModel : '';
        $('settings-budget').value = typeof s.dailyBudget === 'number' ? String(s.dailyBudget) : '';
        $('settings-hard-cap').checked = s.budgetHardCap === true;
        $('settings-config-error').hidden = !s.configError;
        $('settings-config-error').textContent = s.configError ? 'config.json is not in force: ' + s.configError : '';
        const list = $('settings-model-list');
        list.replaceChildren();
        for (const o of $('model').options) if (o.value) list.append(Object.assign(el('option'), { value: o.value }));
      }),
      section('settings-autonomy', async () => {
        const p = await api('GET', '/api/settings/permissions');
        $('settings-autonomy-level').value = ['normal', 'trusted', 'yolo'].includes(p.defaultAutonomy) ? p.defaultAutonomy : 'normal';
      }),
      section('settings-vault', loadVault),
      section('settings-mcp', loadMCP),
    ]);
  }

  async function loadVault() {
    const r = await api('GET', '/api/vault');
    const ul = $('settings-vault-list');
    ul.replaceChildren();
    for (const s of (r && Array.isArray(r.secrets) ? r.secrets : [])) {
      if (!s || typeof s.name !== 'string') continue;
      const li = el('li');
      li.append(el('span', 'name', s.name), el('span', 'meta', String(s.type || '')));
      const del = button('Delete', 'delete', async () => {
        if (!del.classList.contains('confirm')) {
          del.classList.add('confirm');
          del.textContent = 'Delete it?';
          return;
        }
        try {
          await api('DELETE', '/api/vault/' + enc(s.name));
          await loadVault();
        } catch (err) {
          settingsError(err);
        }
      });
      li.append(del);
      ul.append(li);
    }
    if (!ul.children.length) ul.append(el('li', 'meta', 'No keys stored.'));
  }

  async function loadMCP() {
    const r = await api('GET', '/api/mcp/servers' + (state.workspace ? '?workspace=' + enc(state.workspace) : ''));
    const ul = $('settings-mcp-list');
    ul.replaceChildren();
    for (const s of (r && Array.isArray(r.servers) ? r.servers : [])) {
      if (!s || typeof s.name !== 'string') continue;
      const li = el('li');
      const tools = Array.isArray(s.tools) ? s.tools.length : 0;
      li.append(el('span', 'name', s.name), el('span', 'meta', [s.scope, s.transport, tools + (tools === 1 ? ' tool' : ' tools')].filter(Boolean).join(' · ')),
        el('span', 'mcp-state ' + String(s.state || ''), String(s.state || '')));
      if (s.error) li.append(el('div', 'error-text', String(s.error)));
      ul.append(li);
    }
    for (const e of (r && Array.isArray(r.configErrors) ? r.configErrors : [])) ul.append(el('li', 'error-text', String(e)));
    if (!ul.children.length) ul.append(el('li', 'meta', 'No MCP servers configured.'));
  }

  function saved(form) {
    form.querySelector('.saved').hidden = false;
  }

  async function saveModels(e) {
    e.preventDefault();
    const budget = $('settings-budget').value.trim();
    const body = { budgetHardCap: $('settings-hard-cap').checked, dailyBudget: budget === '' ? null : Number(budget) };
    const model = $('settings-default-model').value.trim();
    if (model) body.defaultModel = model;
    try {
      await api('PUT', '/api/settings', body);
      saved(e.target);
    } catch (err) {
      settingsError(err);
    }
  }

  async function saveAutonomy(e) {
    e.preventDefault();
    try {
      await api('PUT', '/api/settings/permissions', { defaultAutonomy: $('settings-autonomy-level').value });
      saved(e.target);
    } catch (err) {
      settingsError(err);
    }
  }

  async function addVaultKey(e) {
    e.preventDefault();
    const name = $('settings-vault-name').value.trim();
    const value = $('settings-vault-value').value;
    if (!name || !value) return;
    try {
      await api('POST', '/api/vault', { name, value });
      $('settings-vault-name').value = '';
      $('settings-vault-value').value = '';
      await loadVault();
    } catch (err) {
      settingsError(err);
    }
  }

  // ---- model picker ----------------------------------------------------
  // GET /api/litellm/models ({models: [id…]}) lists what the model server
  // offers; the pick (remembered in this browser) is sent as the chat
  // request's model. A server without the route (404), or with nothing to
  // list, keeps the picker hidden and the server's default in use.

  async function loadModels(defaultModel) {
    let models = [];
    try {
      const r = await api('GET', '/api/litellm/models');
      models = (r && Array.isArray(r.models) ? r.models : []).filter(m => typeof m === 'string' && m);
    } catch (_) {
      models = [];
    }
    const sel = $('model');
    sel.replaceChildren();
    sel.dataset.loaded = 'true'; // the list has been asked for (tests wait on it)
    if (!models.length) {
      sel.hidden = true;
      return;
    }
    const def = el('option', '', 'Default' + (defaultModel ? ' (' + defaultModel + ')' : ''));
    def.value = '';
    sel.append(def);
    for (const m of models) {
      const o = el('option', '', m);
      o.value = m;
      sel.append(o);
    }
    const want = store.get('model');
    sel.value = models.includes(want) ? want : '';
    sel.hidden = false;
    $('status').hidden = true;
  }

  // ---- theme, help, keys ---------------------------------------------

  function theme() {
    return document.documentElement.dataset.theme ||
      (matchMedia('(prefers-color-scheme: dark)').matches ? 'dark' : 'light');
  }

  function showTheme() {
    const dark = theme() === 'dark';
    $('theme').setAttribute('aria-label', dark ? 'Use the light theme' : 'Use the dark theme');
    $('theme').setAttribute('aria-pressed', String(dark));
  }

  // toggleTheme switches to the other theme and remembers the choice (until
  // then the page follows the system's setting).
  function toggleTheme() {
    const next = theme() === 'dark' ? 'light' : 'dark';
    document.documentElement.dataset.theme = next;
    store.set('theme', next);
    showTheme();
  }

  function showHelp() {
    const d = $('help-dialog');
    if (!d.open) d.showModal();
    $('help-close').focus();
  }

  // signOut forgets this browser's token (and what it had open) and starts
  // over at the sign-in dialog.
  function signOut() {
    ['token', 'session', 'workspace', 'turn'].forEach(k => store.del(k));
    state.leaving = true;
    location.reload();
  }

  function onKey(e) {
    const mod = e.ctrlKey || e.metaKey;
    const key = e.key.length === 1 ? e.key.toLowerCase() : e.key;
    if (document.querySelector('dialog[open]')) return; // a dialog has the keys
    if (mod && e.shiftKey && key === 'o') {
      e.preventDefault();
      newChat();
      return;
    }
    if (mod && !e.shiftKey && !e.altKey && key === 'k') {
      e.preventDefault();
      if (matchMedia('(max-width: 760px)').matches) document.body.classList.add('menu-open');
      $('search').focus();
      $('search').select();
      return;
    }
    if (e.key === 'Escape') {
      if (e.shiftKey) {
        e.preventDefault();
        $('input').focus();
        return;
      }
      // Escape in the rename field cancels the rename only.
      if (e.target.classList.contains('rename-input')) return;
      if (document.body.classList.contains('menu-open')) {
        closeMenu();
        return;
      }
      if (state.turn) {
        e.preventDefault();
        stop();
        return;
      }
      if (e.target === $('input')) cancelEdit(true);
      return;
    }
    if (mod || e.altKey || e.target.closest('input, textarea, select, [contenteditable]')) return;
    if (e.key === '/') {
      e.preventDefault();
      $('input').focus();
    } else if (e.key === '?') {
      e.preventDefault();
      showHelp();
    }
  }

  // ---- layout --------------------------------------------------------

  // The phone-width drawer: ☰ opens it; its × button, a tap on the scrim
  // beside it and Escape close it (focus goes back to ☰).
  function openMenu() {
    document.body.classList.add('menu-open');
    $('menu-close').focus();
  }

  function closeMenu() {
    if (!document.body.classList.contains('menu-open')) return;
    document.body.classList.remove('menu-open');
    if ($('sidebar').contains(document.activeElement)) $('menu').focus();
  }

  function bindUI() {
    $('composer').addEventListener('submit', e => { e.preventDefault(); send(); });
    $('input').addEventListener('keydown', e => {
      if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
        e.preventDefault();
        send();
      }
    });
    $('stop').addEventListener('click', stop);
    $('new-session').addEventListener('click', newChat);
    $('workspace').addEventListener('change', async e => {
      await selectWorkspace(e.target.value);
      newChat();
    });
    $('new-workspace').addEventListener('click', () => showWorkspaceForm('create'));
    $('workspace-form').addEventListener('submit', submitWorkspace);
    $('rename-workspace').addEventListener('click', () => showWorkspaceForm('rename'));
    $('delete-workspace').addEventListener('click', deleteWorkspace);
    let searchTimer = 0;
    $('search').addEventListener('input', () => {
      clearTimeout(searchTimer);
      searchTimer = setTimeout(loadSessions, 200);
    });
    $('approvals-toggle').addEventListener('click', () => {
      if (togglePanel('approvals')) refreshApprovals();
    });
    $('memory-toggle').addEventListener('click', () => {
      if (togglePanel('memory')) loadMemory();
    });
    let memoryTimer = 0;
    $('memory-search').addEventListener('input', () => {
      clearTimeout(memoryTimer);
      memoryTimer = setTimeout(loadMemory, 250);
    });
    $('theme').addEventListener('click', toggleTheme);
    $('settings-button').addEventListener('click', openSettings);
    $('settings-models').addEventListener('submit', saveModels);
    $('settings-autonomy').addEventListener('submit', saveAutonomy);
    $('settings-vault-form').addEventListener('submit', addVaultKey);
    document.addEventListener('visibilitychange', () => { if (!document.hidden) document.title = 'Waggle'; });
    $('files-toggle').addEventListener('click', () => {
      if (togglePanel('files')) loadFiles();
    });
    $('files-up').addEventListener('click', () => {
      filesState.dir = filesState.dir.replace(/\/[^/]*\/?$/, '') || '/';
      loadFiles();
    });
    $('attach').addEventListener('click', () => $('attach-input').click());
    $('attach-input').addEventListener('change', e => {
      upload([...e.target.files]);
      e.target.value = '';
    });
    // Drop files anywhere on the page to attach them.
    document.addEventListener('dragover', e => {
      if (!filesState.available || !e.dataTransfer || ![...e.dataTransfer.types].includes('Files')) return;
      e.preventDefault();
      document.body.classList.add('dropping');
    });
    document.addEventListener('dragleave', e => { if (!e.relatedTarget) document.body.classList.remove('dropping'); });
    document.addEventListener('drop', e => {
      document.body.classList.remove('dropping');
      if (!filesState.available || !e.dataTransfer || !e.dataTransfer.files.length) return;
      e.preventDefault();
      upload([...e.dataTransfer.files]);
    });
    $('model').addEventListener('change', e => {
      if (e.target.value) store.set('model', e.target.value);
      else store.del('model');
    });
    matchMedia('(prefers-color-scheme: dark)').addEventListener('change', showTheme);
    $('help-button').addEventListener('click', showHelp);
    $('sign-out').addEventListener('click', signOut);
    $('jump').addEventListener('click', jumpToLatest);
    $('messages').addEventListener('scroll', () => { $('jump').hidden = nearBottom(); });
    $('edit-cancel').addEventListener('click', () => { cancelEdit(true); $('input').focus(); });
    $('error-close').addEventListener('click', hideError);
    $('menu').addEventListener('click', openMenu);
    $('menu-close').addEventListener('click', closeMenu);
    $('scrim').addEventListener('click', closeMenu);
    document.addEventListener('keydown', onKey);
    $('token-form').addEventListener('submit', saveToken);
    $('token-dialog').addEventListener('cancel', e => e.preventDefault());
    window.addEventListener('pagehide', () => { state.leaving = true; });
  }

  async function health() {
    for (let i = 0; ; i++) {
      try {
        return await api('GET', '/health');
      } catch (err) {
        if (err.status !== 503 || i >= 40) throw err;
      }
      await new Promise(r => setTimeout(r, 500));
    }
  }

  async function boot() {
    bindUI();
    showTheme();
    let h = { mode: 'local' };
    let reached = false;
    try {
      h = await health();
      reached = true;
    } catch (err) {
      showError(err);
    }
    state.mode = h.mode || 'local';
    document.body.dataset.mode = state.mode;
    if (state.mode === 'team') {
      state.token = store.get('token');
      $('sign-out').hidden = false;
      if (!state.token) await askToken();
    } else {
      // /health hands the token only to this machine's own clients; from
      // elsewhere (a server bound beyond loopback) the user pastes it.
      state.token = h.wsToken || store.get('token') || null;
      // A pasted token can be forgotten again; /health's cannot.
      $('sign-out').hidden = !!h.wsToken || !state.token;
      if (!state.token && reached) {
        $('token-help').textContent = 'This Waggle server is on another machine. Paste its access token ' +
          '(on that machine: the wsToken field of http://127.0.0.1:<port>/health).';
        await askToken();
      }
    }
    $('status').textContent = h.offline ? 'echo mode' : (h.defaultModel || '');
    if (state.mode === 'team') await loadTeams();
    loadModels(h.defaultModel); // not awaited: the page works without it
    await loadWorkspaces();
    await probeFiles();
    const saved = store.get('turn');
    if (saved && saved.id) {
      refreshApprovals();
      await resume(saved);
    } else {
      const last = store.get('session');
      if (last && last.workspace === state.workspace) {
        await loadSessions();
        if (state.sessions.some(s => s.id === last.id)) await openSession(last.id);
      } else {
        await loadSessions();
      }
    }
    refreshApprovals();
    // Polled while hidden too (slower): a waiting approval is news.
    let polls = 0;
    setInterval(() => { if (!document.hidden || ++polls % 6 === 0) refreshApprovals(); }, 5000);
    followNotifications();
    document.body.dataset.ready = 'true';
  }

  boot();
})();
