// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

/**
 * Files into and out of a tool instance (issue 32.8). Files dropped onto a
 * tool terminal (from the desktop, or items of JupyterLab's file browser) are
 * uploaded into the instance, into the terminal's current folder, as the tool
 * type's user; "Download from Tool Instance…" (command palette, and the
 * terminal's context menu) asks for a path and downloads that file. The REST
 * routes are `/tool-terminal/api/instances/{id}/files`.
 */

import type {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import {
  Dialog,
  ICommandPalette,
  InputDialog,
  Notification,
  showDialog,
  showErrorMessage
} from '@jupyterlab/apputils';
import type { MainAreaWidget } from '@jupyterlab/apputils';
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';
import { ITranslator, nullTranslator } from '@jupyterlab/translation';
import type { TranslationBundle } from '@jupyterlab/translation';

import { listInstances } from './api';
import { toolTerminalSettings } from './settings';
import type { IToolTerminal } from './tokens';
import {
  EXTENSION_ID,
  IToolTerminalTracker,
  TRANSLATION_DOMAIN
} from './tokens';

/**
 * The command ids of file transfers.
 */
export namespace FilesCommandIDs {
  /**
   * Ask for a path in a tool instance and download that file.
   */
  export const download = 'tool-terminal:download-file';
}

/**
 * The MIME type of JupyterLab file browser items being dragged (their paths).
 */
const CONTENTS_MIME = 'application/x-jupyter-icontents';

/**
 * The class a tool terminal has while files are dragged over it.
 */
const DROP_TARGET_CLASS = 'jp-ToolTerminal-dropTarget';

/**
 * The URL of an instance's file route, with its query.
 */
export function filesUrl(
  serverSettings: ServerConnection.ISettings,
  instance: string,
  query: Record<string, string>
): string {
  const url = URLExt.join(
    serverSettings.baseUrl,
    'tool-terminal/api/instances',
    encodeURIComponent(instance),
    'files'
  );
  return url + URLExt.objectToQueryString(query);
}

/**
 * The message of a refused request's JSON body (or its status).
 */
async function refusal(response: Response): Promise<string> {
  try {
    const body = (await response.json()) as { message?: unknown };
    if (typeof body.message === 'string') {
      return body.message;
    }
  } catch {
    // not JSON: the status says it
  }
  return `${response.status} ${response.statusText}`;
}

/**
 * Upload `body` as `name` into the terminal's current folder (`path`
 * relative to the shell's working directory), asking before replacing a file.
 * Resolves with the file's absolute path, or `null` if the user declined.
 */
export async function uploadIntoTerminal(
  serverSettings: ServerConnection.ISettings,
  terminal: { instanceId: string; sessionId: string | null },
  name: string,
  body: Blob,
  trans: TranslationBundle
): Promise<string | null> {
  const query: Record<string, string> = { path: name };
  if (terminal.sessionId !== null) {
    query.session = terminal.sessionId;
  }
  const put = (overwrite: boolean) =>
    ServerConnection.makeRequest(
      filesUrl(
        serverSettings,
        terminal.instanceId,
        overwrite ? { ...query, overwrite: 'true' } : query
      ),
      {
        method: 'PUT',
        body,
        headers: { 'Content-Type': 'application/octet-stream' }
      },
      serverSettings
    );
  let response = await put(false);
  if (response.status === 409) {
    const message = await refusal(response);
    if (!message.includes('overwrite=true')) {
      throw new Error(message);
    }
    const answer = await showDialog({
      title: trans.__('Replace File?'),
      body: trans.__(
        '%1 already exists in the tool instance %2. Replace it?',
        name,
        terminal.instanceId
      ),
      buttons: [
        Dialog.cancelButton(),
        Dialog.warnButton({ label: trans.__('Replace') })
      ]
    });
    if (!answer.button.accept) {
      return null;
    }
    response = await put(true);
  }
  if (!response.ok) {
    throw new Error(await refusal(response));
  }
  const model = (await response.json()) as { path: string };
  return model.path;
}

/**
 * Download the file at `path` of `instance` (relative to the terminal's
 * current folder when `session` is given); resolves with its bytes and name.
 */
export async function downloadFromInstance(
  serverSettings: ServerConnection.ISettings,
  instance: string,
  path: string,
  session: string | null
): Promise<{ blob: Blob; name: string }> {
  const query: Record<string, string> = { path };
  if (session !== null) {
    query.session = session;
  }
  const response = await ServerConnection.makeRequest(
    filesUrl(serverSettings, instance, query),
    { method: 'GET' },
    serverSettings
  );
  if (!response.ok) {
    throw new Error(await refusal(response));
  }
  const name = path.replace(/\/+$/, '').split('/').pop() || 'download';
  return { blob: await response.blob(), name };
}

/**
 * Save `blob` as a download named `name` (the browser's own download).
 */
export function saveBlob(blob: Blob, name: string): void {
  const url = URL.createObjectURL(blob);
  const link = document.createElement('a');
  link.href = url;
  link.download = name;
  link.style.display = 'none';
  document.body.appendChild(link);
  link.click();
  link.remove();
  // After the click has handed the URL to the download.
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}

/**
 * The part of a Lumino drag event (`@lumino/dragdrop`'s `Drag.Event`) read
 * here: a drag of file browser items.
 */
interface ILuminoDragEvent extends Event {
  mimeData: { hasData(mime: string): boolean; getData(mime: string): unknown };
  proposedAction: string;
  dropAction: string;
}

/**
 * The file transfers plugin.
 */
export const filesPlugin: JupyterFrontEndPlugin<void> = {
  id: `${EXTENSION_ID}:files`,
  description:
    'Drop files onto a tool terminal to upload them into its instance; download files from a tool instance.',
  autoStart: true,
  requires: [IToolTerminalTracker],
  optional: [ICommandPalette, ITranslator],
  activate: (
    app: JupyterFrontEnd,
    tracker: IToolTerminalTracker,
    palette: ICommandPalette | null,
    translator: ITranslator | null
  ): void => {
    const trans = (translator ?? nullTranslator).load(TRANSLATION_DOMAIN);
    const serverSettings = toolTerminalSettings(
      app.serviceManager.serverSettings
    );
    const category = trans.__('Tool Terminals');

    const upload = async (terminal: IToolTerminal, files: File[]) => {
      for (const file of files) {
        try {
          const path = await uploadIntoTerminal(
            serverSettings,
            terminal,
            file.name,
            file,
            trans
          );
          if (path !== null) {
            Notification.success(
              trans.__('Uploaded %1 to %2', file.name, path),
              { autoClose: 4000 }
            );
          }
        } catch (error) {
          await showErrorMessage(
            trans.__('Upload to %1 Failed', terminal.instanceId),
            (error as Error).message
          );
        }
      }
    };

    // File browser items: fetched from the Jupyter server, then uploaded.
    const uploadContents = async (terminal: IToolTerminal, paths: string[]) => {
      const pageSettings = app.serviceManager.serverSettings;
      const files: File[] = [];
      for (const path of paths) {
        const response = await ServerConnection.makeRequest(
          URLExt.join(pageSettings.baseUrl, 'files', URLExt.encodeParts(path)),
          { method: 'GET' },
          pageSettings
        );
        if (!response.ok) {
          await showErrorMessage(
            trans.__('Upload to %1 Failed', terminal.instanceId),
            trans.__('%1 cannot be read (it may be a folder).', path)
          );
          continue;
        }
        const name = path.split('/').pop() ?? path;
        files.push(new File([await response.blob()], name));
      }
      await upload(terminal, files);
    };

    const watch = (widget: MainAreaWidget<IToolTerminal>) => {
      const node = widget.node;
      const hasFiles = (event: DragEvent) =>
        event.dataTransfer?.types.includes('Files') ?? false;
      node.addEventListener(
        'dragover',
        (event: DragEvent) => {
          if (hasFiles(event)) {
            event.preventDefault();
            event.dataTransfer!.dropEffect = 'copy';
            node.classList.add(DROP_TARGET_CLASS);
          }
        },
        true
      );
      node.addEventListener('dragleave', () =>
        node.classList.remove(DROP_TARGET_CLASS)
      );
      node.addEventListener(
        'drop',
        (event: DragEvent) => {
          node.classList.remove(DROP_TARGET_CLASS);
          if (!hasFiles(event)) {
            return;
          }
          event.preventDefault();
          event.stopPropagation();
          void upload(widget.content, Array.from(event.dataTransfer!.files));
        },
        true
      );
      const luminoDrag = (event: Event) => {
        const drag = event as ILuminoDragEvent;
        if (!drag.mimeData?.hasData(CONTENTS_MIME)) {
          return;
        }
        event.preventDefault();
        event.stopPropagation();
        drag.dropAction = drag.proposedAction;
        if (event.type === 'lm-dragleave') {
          node.classList.remove(DROP_TARGET_CLASS);
        } else if (event.type === 'lm-drop') {
          node.classList.remove(DROP_TARGET_CLASS);
          const paths = drag.mimeData.getData(CONTENTS_MIME);
          void uploadContents(
            widget.content,
            Array.isArray(paths) ? paths.map(String) : [String(paths)]
          );
        } else {
          node.classList.add(DROP_TARGET_CLASS);
        }
      };
      for (const type of [
        'lm-dragenter',
        'lm-dragover',
        'lm-dragleave',
        'lm-drop'
      ]) {
        node.addEventListener(type, luminoDrag);
      }
    };
    tracker.forEach(watch);
    tracker.widgetAdded.connect((_, widget) => watch(widget));

    app.commands.addCommand(FilesCommandIDs.download, {
      label: trans.__('Download from Tool Instance…'),
      caption: trans.__(
        'Download a file from a tool instance, read as its tool type’s user'
      ),
      describedBy: { args: { type: 'object', properties: {} } },
      execute: async () => {
        const current = tracker.currentWidget?.content ?? null;
        let instance = current?.instanceId ?? null;
        if (instance === null) {
          const running = (await listInstances(serverSettings)).filter(
            i => i.status === 'running'
          );
          if (running.length === 0) {
            await showErrorMessage(
              trans.__('Download from Tool Instance'),
              trans.__('You have no running tool instance.')
            );
            return;
          }
          const choice = await InputDialog.getItem({
            title: trans.__('Download from Tool Instance'),
            label: trans.__('Tool instance'),
            items: running.map(i => i.id)
          });
          if (!choice.button.accept || choice.value === null) {
            return;
          }
          instance = choice.value;
        }
        const session = current?.isLive ? current.sessionId : null;
        const asked = await InputDialog.getText({
          title: trans.__('Download from Tool Instance'),
          label:
            session !== null
              ? trans.__(
                  'Path in %1 (absolute, or relative to the terminal’s current folder)',
                  instance
                )
              : trans.__('Absolute path in %1', instance),
          placeholder:
            session !== null
              ? trans.__('notes.txt')
              : trans.__('/data/notes.txt')
        });
        const path = asked.value?.trim() ?? '';
        if (!asked.button.accept || path === '') {
          return;
        }
        try {
          const { blob, name } = await downloadFromInstance(
            serverSettings,
            instance,
            path,
            path.startsWith('/') ? null : session
          );
          saveBlob(blob, name);
        } catch (error) {
          await showErrorMessage(
            trans.__('Download from %1 Failed', instance),
            (error as Error).message
          );
        }
      }
    });
    app.contextMenu.addItem({
      command: FilesCommandIDs.download,
      selector: '.jp-ToolTerminal',
      rank: 7
    });
    palette?.addItem({ command: FilesCommandIDs.download, category });
  }
};
