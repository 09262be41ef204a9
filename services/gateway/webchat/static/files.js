// The workspace's files: browse, download, upload (the 📎 button or a
// drop on the page), and images the agent wrote shown inline.

import { api, enc, request } from './api.js';
import { $, button, el, showError } from './dom.js';
import { state } from './state.js';

// ---- files ---------------------------------------------------------------
// The workspace's files through GET /api/workspaces/:id/files/list and
// /download, and uploads through /upload ({path, name, data: base64}).
// A server without these routes (404 on the list) hides the Files
// button, the attach button and dropping. An uploaded file is attached
// to the message as its workspace path, which the agent's file tools read.

export const filesState = { available: false, dir: '/' };
const imageTypes = /\.(png|jpe?g|gif|webp)$/i;

function filesBase() { return '/api/workspaces/' + enc(state.workspace) + '/files/'; }

export async function probeFiles() {
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

export async function loadFiles() {
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
export async function showImage(note, path) {
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
export async function upload(files) {
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
