// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

/**
 * Recordings in JupyterLab (issue 32.11): "Tool Terminal Recordings" lists
 * the user's own recordings (tool types with `"record": true`, asciicast v2,
 * redacted when written); each plays in a panel of its own (xterm.js, at 1x,
 * 2x or 4x, pauses longer than two seconds shortened) or downloads as a
 * `.cast` file (`asciinema play` plays it too). Server routes:
 * `GET /tool-terminal/api/recordings[/{id}]`.
 */

import type {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import {
  ICommandPalette,
  MainAreaWidget,
  showErrorMessage
} from '@jupyterlab/apputils';
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';
import { ITranslator, nullTranslator } from '@jupyterlab/translation';
import type { TranslationBundle } from '@jupyterlab/translation';
import { Widget } from '@lumino/widgets';
import { Terminal } from '@xterm/xterm';

import { requestAPI } from './api';
import { saveBlob } from './files';
import { toolTerminalSettings } from './settings';
import { EXTENSION_ID, TRANSLATION_DOMAIN } from './tokens';

/**
 * The command ids of recordings.
 */
export namespace RecordingsCommandIDs {
  /**
   * Open the list of the user's recordings.
   */
  export const list = 'tool-terminal:recordings';
}

/**
 * One recording, as `GET /tool-terminal/api/recordings` lists it.
 */
export interface IRecording {
  id: string;
  instance: string;
  session: string;
  title: string;
  started: string;
  size: number;
}

/**
 * An asciicast v2 file, parsed: its header's size and its events
 * (`[seconds, code, data]`).
 */
export interface ICast {
  width: number;
  height: number;
  events: [number, string, string][];
}

/**
 * The longest pause a replay keeps (seconds), as asciinema's
 * `idle_time_limit`.
 */
const IDLE_LIMIT = 2;

/**
 * Parse an asciicast v2 file; lines that are not events are skipped.
 */
export function parseCast(text: string): ICast {
  const lines = text.split('\n');
  const header = JSON.parse(lines[0]) as { width?: number; height?: number };
  const events: [number, string, string][] = [];
  for (const line of lines.slice(1)) {
    if (line.trim() === '') {
      continue;
    }
    try {
      const event = JSON.parse(line) as unknown;
      if (
        Array.isArray(event) &&
        typeof event[0] === 'number' &&
        typeof event[1] === 'string' &&
        typeof event[2] === 'string'
      ) {
        events.push([event[0], event[1], event[2]]);
      }
    } catch {
      // a line cut short (a recording still being written): the rest plays
    }
  }
  return {
    width: header.width ?? 80,
    height: header.height ?? 24,
    events
  };
}

/**
 * Fetch one recording's file.
 */
async function fetchRecording(
  serverSettings: ServerConnection.ISettings,
  id: string
): Promise<Blob> {
  const response = await ServerConnection.makeRequest(
    URLExt.join(
      serverSettings.baseUrl,
      'tool-terminal/api/recordings',
      encodeURIComponent(id)
    ),
    { method: 'GET' },
    serverSettings
  );
  if (!response.ok) {
    let message = `${response.status} ${response.statusText}`;
    try {
      message = ((await response.json()) as { message: string }).message;
    } catch {
      // not JSON
    }
    throw new Error(message);
  }
  return response.blob();
}

/**
 * A player of one recording: an xterm.js terminal fed the recording's
 * output at its pace.
 */
export class RecordingPlayer extends Widget {
  constructor(cast: ICast, trans: TranslationBundle) {
    super();
    this.addClass('jp-ToolTerminal-player');
    this._cast = cast;
    const controls = document.createElement('div');
    controls.className = 'jp-ToolTerminal-playerControls';
    this._play = document.createElement('button');
    this._play.className = 'jp-mod-styled jp-mod-accept';
    this._play.addEventListener('click', () => this.toggle());
    const restart = document.createElement('button');
    restart.className = 'jp-mod-styled';
    restart.textContent = trans.__('Restart');
    restart.addEventListener('click', () => this.restart());
    this._speed = document.createElement('select');
    this._speed.className = 'jp-mod-styled';
    for (const speed of [1, 2, 4]) {
      const option = document.createElement('option');
      option.value = String(speed);
      option.textContent = `${speed}×`;
      this._speed.appendChild(option);
    }
    this._progress = document.createElement('span');
    this._progress.className = 'jp-ToolTerminal-playerProgress';
    controls.append(this._play, restart, this._speed, this._progress);
    const screen = document.createElement('div');
    this.node.append(controls, screen);
    this._trans = trans;
    this._terminal = new Terminal({
      cols: cast.width,
      rows: cast.height,
      disableStdin: true,
      convertEol: false,
      scrollback: 1000
    });
    this._terminal.open(screen);
    this.restart();
  }

  /**
   * Whether the replay is running.
   */
  get playing(): boolean {
    return this._timer !== null;
  }

  /**
   * Play from where it stopped, or pause.
   */
  toggle(): void {
    if (this.playing) {
      this._pause();
    } else {
      this._next();
    }
    this._update();
  }

  /**
   * Clear the screen and play from the start.
   */
  restart(): void {
    this._pause();
    this._terminal.reset();
    this._terminal.resize(this._cast.width, this._cast.height);
    this._index = 0;
    this._next();
    this._update();
  }

  dispose(): void {
    this._pause();
    this._terminal.dispose();
    super.dispose();
  }

  private _pause(): void {
    if (this._timer !== null) {
      clearTimeout(this._timer);
      this._timer = null;
    }
  }

  private _next(): void {
    const events = this._cast.events;
    if (this._index >= events.length) {
      this._timer = null;
      this._update();
      return;
    }
    const [at, code, data] = events[this._index];
    const before = this._index > 0 ? events[this._index - 1][0] : 0;
    const wait = Math.min(Math.max(at - before, 0), IDLE_LIMIT);
    const speed = Number(this._speed.value) || 1;
    this._timer = setTimeout(
      () => {
        if (code === 'o') {
          this._terminal.write(data);
        } else if (code === 'r') {
          const [cols, rows] = data.split('x').map(Number);
          if (cols > 0 && rows > 0) {
            this._terminal.resize(cols, rows);
          }
        }
        this._index++;
        this._update();
        this._next();
      },
      (wait * 1000) / speed
    );
  }

  private _update(): void {
    const total = this._cast.events.length;
    const ended = this._index >= total;
    this._play.textContent = ended
      ? this._trans.__('Ended')
      : this.playing
        ? this._trans.__('Pause')
        : this._trans.__('Play');
    this._play.disabled = ended;
    this._progress.textContent = this._trans.__(
      '%1 of %2 events',
      this._index,
      total
    );
  }

  private _cast: ICast;
  private _terminal: Terminal;
  private _trans: TranslationBundle;
  private _play: HTMLButtonElement;
  private _speed: HTMLSelectElement;
  private _progress: HTMLSpanElement;
  private _index = 0;
  private _timer: ReturnType<typeof setTimeout> | null = null;
}

/**
 * The list of the user's recordings, each with Play and Download.
 */
export class RecordingsList extends Widget {
  constructor(
    private _options: {
      serverSettings: ServerConnection.ISettings;
      trans: TranslationBundle;
      play: (recording: IRecording) => void;
    }
  ) {
    super();
    this.addClass('jp-ToolTerminal-recordings');
    void this.refresh();
  }

  /**
   * List the recordings again.
   */
  async refresh(): Promise<void> {
    const { trans } = this._options;
    let recordings: IRecording[];
    try {
      recordings = await requestAPI<IRecording[]>(
        'recordings',
        this._options.serverSettings
      );
    } catch (error) {
      this.node.textContent = (error as Error).message;
      return;
    }
    this.node.textContent = '';
    const heading = document.createElement('div');
    heading.className = 'jp-ToolTerminal-recordingsHeading';
    const refresh = document.createElement('button');
    refresh.className = 'jp-mod-styled';
    refresh.textContent = trans.__('Refresh');
    refresh.addEventListener('click', () => void this.refresh());
    heading.append(
      trans.__(
        'Your recorded tool terminals (redacted when written): %1',
        recordings.length
      ),
      refresh
    );
    this.node.appendChild(heading);
    if (recordings.length === 0) {
      const none = document.createElement('p');
      none.textContent = trans.__(
        'No recordings: only tool types set to record ("record": true) make them.'
      );
      this.node.appendChild(none);
      return;
    }
    const table = document.createElement('table');
    const head = table.createTHead().insertRow();
    for (const title of [
      trans.__('Started'),
      trans.__('Tool instance'),
      trans.__('Title'),
      trans.__('Size'),
      ''
    ]) {
      const cell = document.createElement('th');
      cell.textContent = title;
      head.appendChild(cell);
    }
    const body = table.createTBody();
    for (const recording of recordings) {
      const row = body.insertRow();
      row.dataset.id = recording.id;
      const started = new Date(recording.started);
      for (const text of [
        started.toLocaleString(),
        recording.instance,
        recording.title,
        trans.__('%1 KiB', Math.ceil(recording.size / 1024))
      ]) {
        row.insertCell().textContent = text;
      }
      const actions = row.insertCell();
      const play = document.createElement('button');
      play.className = 'jp-mod-styled jp-mod-accept';
      play.textContent = trans.__('Play');
      play.addEventListener('click', () => this._options.play(recording));
      const download = document.createElement('button');
      download.className = 'jp-mod-styled';
      download.textContent = trans.__('Download');
      download.addEventListener('click', () => {
        fetchRecording(this._options.serverSettings, recording.id)
          .then(blob => saveBlob(blob, `${recording.id}.cast`))
          .catch(error =>
            showErrorMessage(
              trans.__('Download Failed'),
              (error as Error).message
            )
          );
      });
      actions.append(play, download);
    }
    this.node.appendChild(table);
  }
}

/**
 * The recordings plugin.
 */
export const recordingsPlugin: JupyterFrontEndPlugin<void> = {
  id: `${EXTENSION_ID}:recordings`,
  description:
    "List, play and download the user's own tool terminal recordings.",
  autoStart: true,
  optional: [ICommandPalette, ITranslator],
  activate: (
    app: JupyterFrontEnd,
    palette: ICommandPalette | null,
    translator: ITranslator | null
  ): void => {
    const trans = (translator ?? nullTranslator).load(TRANSLATION_DOMAIN);
    const serverSettings = toolTerminalSettings(
      app.serviceManager.serverSettings
    );
    let list: MainAreaWidget<RecordingsList> | null = null;

    const play = async (recording: IRecording) => {
      try {
        const text = await (
          await fetchRecording(serverSettings, recording.id)
        ).text();
        const player = new MainAreaWidget({
          content: new RecordingPlayer(parseCast(text), trans)
        });
        player.id = `tool-terminal-recording-${recording.id}`;
        player.title.label = trans.__('Recording: %1', recording.instance);
        player.title.caption = recording.title;
        player.title.closable = true;
        app.shell.add(player, 'main');
        app.shell.activateById(player.id);
      } catch (error) {
        await showErrorMessage(
          trans.__('Cannot Play the Recording'),
          (error as Error).message
        );
      }
    };

    app.commands.addCommand(RecordingsCommandIDs.list, {
      label: trans.__('Tool Terminal Recordings'),
      caption: trans.__('List, play and download your recorded tool terminals'),
      describedBy: { args: { type: 'object', properties: {} } },
      execute: () => {
        if (list === null || list.isDisposed) {
          list = new MainAreaWidget({
            content: new RecordingsList({ serverSettings, trans, play })
          });
          list.id = 'tool-terminal-recordings';
          list.title.label = trans.__('Tool Terminal Recordings');
          list.title.closable = true;
          app.shell.add(list, 'main');
        } else {
          void list.content.refresh();
        }
        app.shell.activateById(list.id);
      }
    });
    palette?.addItem({
      command: RecordingsCommandIDs.list,
      category: trans.__('Tool Terminals')
    });
  }
};
