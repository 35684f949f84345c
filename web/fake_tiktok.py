"""/fake/tiktok/: the TikTok fake served by Django for the demo. Answers 404 unless
``FAKE_TIKTOK_ENABLED`` (set by the local settings, never by production)."""

from django.conf import settings
from django.http import Http404, HttpResponse, HttpResponseRedirect
from django.urls import re_path
from django.views.decorators.csrf import csrf_exempt

from campaigns.platforms.tiktok_fake import FakeRequest, handle


@csrf_exempt
def fake_tiktok_view(request, path: str):
    if not settings.FAKE_TIKTOK_ENABLED:
        raise Http404("The TikTok fake is off.")
    response = handle(
        FakeRequest(
            method=request.method,
            path=path,
            query=request.GET.dict(),
            form=request.POST.dict(),
            body=request.body,
            authorization=request.headers.get("Authorization", ""),
        )
    )
    if response.location:
        return HttpResponseRedirect(response.location)
    return HttpResponse(response.body, status=response.status, content_type=response.content_type)


urlpatterns = [re_path(r"^(?P<path>.*)$", fake_tiktok_view, name="fake_tiktok")]
