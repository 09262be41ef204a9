// The HTTP client of the public API (docs/api.md) and the Server-Sent
// Events reader: the page talks to the server only through these.

import { state } from './state.js';
import { askToken } from './token.js';

export class APIError extends Error {
  constructor(status, message, code) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

// ---- HTTP ----------------------------------------------------------

export async function request(method, path, body, extra) {
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

export async function api(method, path, body) {
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

export function enc(s) { return encodeURIComponent(s); }

// ---- Server-Sent Events over fetch ---------------------------------
// EventSource cannot send an Authorization header or POST, so streams
// are read with fetch and parsed here.
export async function readSSE(resp, onEvent) {
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
