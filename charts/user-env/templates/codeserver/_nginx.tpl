{{/*
The file server's whole nginx configuration: the code volume read-only, with directory
listings. Everything nginx writes goes to /tmp (the root filesystem is read-only).
*/}}
{{- define "user-env.nginxConf" -}}
worker_processes 1;
pid /tmp/nginx.pid;
error_log stderr warn;
events {
  worker_connections 1024;
}
http {
  include /etc/nginx/mime.types;
  default_type application/octet-stream;
  access_log /dev/stdout;
  client_body_temp_path /tmp/client_temp;
  proxy_temp_path /tmp/proxy_temp;
  fastcgi_temp_path /tmp/fastcgi_temp;
  uwsgi_temp_path /tmp/uwsgi_temp;
  scgi_temp_path /tmp/scgi_temp;
  sendfile on;
  server_tokens off;
  server {
    listen {{ .Values.codeServer.port }};
    root /srv/code;
    # A symlink on the volume must not reach files outside it.
    disable_symlinks on;
    location / {
      autoindex on;
      # GET (and HEAD) only: nothing can be uploaded or changed.
      limit_except GET {
        deny all;
      }
    }
    # Dot-files (.ipynb_checkpoints, .git, .env) are not code to hand out.
    location ~ /\. {
      deny all;
    }
  }
}
{{- end }}
